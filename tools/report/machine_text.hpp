// This machine in words, for `tpcomm topo` and for the tuning files `tpcomm tune` writes (a file
// says which CPU, reduction kernels and cores its times came from, so one carried to another
// machine can be recognised as measured elsewhere).
#pragma once

#include <string>

#include "launcher/cpu_binding.hpp"

namespace tpcomm::cli {

// The first CPU of /proc/cpuinfo: "AMD EPYC 9B45 (family 26 model 2)", or "unknown CPU".
std::string cpu_model();

// "2 usable, a hardware thread each: 0 | 1" or "4 usable, 8 hardware threads: 0,1 | 2,3 | ...".
std::string cores_text(const CoreThreads& cores);

// "AMD EPYC 9B45 (family 26 model 2), shm kernels avx512bf16, 2 cores (a hardware thread each)".
std::string machine_summary();

}  // namespace tpcomm::cli
