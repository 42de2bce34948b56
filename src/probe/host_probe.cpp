// Host identity: host name and boot id (two processes share a node only if their boot ids match).
#include <unistd.h>

#include <fstream>
#include <string>

#include "probe_parts.hpp"

namespace tpcomm::probe {

HostIdentity probe_host() {
  HostIdentity id;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) id.hostname = name;
  if (id.hostname.empty()) id.hostname = "localhost";
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, id.boot_id);
  return id;
}

}  // namespace tpcomm::probe
