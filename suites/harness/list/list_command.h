// `dlbench list`: the models, backends and devices this build knows.
#pragma once

namespace dlb {

int list_command();

}  // namespace dlb
