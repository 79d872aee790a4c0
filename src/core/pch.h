// Precompiled header for every lmtrain target. Keep it to headers that are both heavy and
// used widely; see CMakeLists.txt.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>
