#include "cli/commands.h"

int main(int argc, char** argv) { return lmtrain::cli::run_main(argc, argv); }
