// A copy of a checkpoint outside its run dir (`train --save_checkpoint PATH`, the seeds'
// "write a checkpoint at the end"): a complete, verified checkpoint dir that --resume,
// --load_checkpoint, generate, eval and export accept like any other.
#pragma once
#include <string>

namespace lmtrain::train {

// Copies checkpoint dir `src` to `dest` via a temporary sibling and a rename, then verifies
// the copy's checksums. An existing checkpoint at `dest` is replaced only once the new copy is
// complete; anything else already at `dest` is refused (UsageError), never overwritten.
void export_checkpoint_copy(const std::string& src, const std::string& dest);

}  // namespace lmtrain::train
