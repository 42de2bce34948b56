// The environment variables launchers set (torchrun, mpirun, srun), part of the registry
// (tpcomm/env.hpp) but kept apart from tpcomm's own.
#pragma once

#include <vector>

#include "tpcomm/env.hpp"

namespace tpcomm::common {

const std::vector<EnvVar>& launch_env_table();

}  // namespace tpcomm::common
