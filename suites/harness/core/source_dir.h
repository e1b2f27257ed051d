// The source tree's path, where dlbench finds suites/, the schemas, reports/ and the peers'
// scripts. It is compiled into one generated file (source_dir.cpp.in) and nowhere else, so that
// every other command line is the same in any clone and ccache shares their objects between
// clones (scripts/build.sh sets its base directory): a fresh clone, as CI builds, recompiles
// that one file.
#pragma once
#include <string>

namespace dlb {

const std::string& source_dir();

}  // namespace dlb
