// The GPU check's `registration` part (registration_check.cpp).
#pragma once

#include <functional>
#include <memory>

#include "tpcomm/bootstrap.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::gpu_check {

using BackendMaker =
    std::function<std::unique_ptr<transport::CollectiveBackend>(std::shared_ptr<Bootstrap>)>;

// Under `tpcomm run -n 2`: graph buffer registration of VMM memory between two processes, the
// experiments E3 (850 captured calls on 253 allocations, more descriptors than one message holds)
// and E6 (an allocation unmapped and replaced at the same address, registered again). 0 when every
// replayed output was right and every call registered.
int registration_check(std::shared_ptr<Bootstrap> bs, const BackendMaker& set_up);

}  // namespace tpcomm::gpu_check
