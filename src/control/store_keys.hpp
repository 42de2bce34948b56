// Store keys that more than one layer reads.
#pragma once

namespace tpcomm::control {

// Set by a rank that serves the group's store itself (rank 0 without a launcher's store): its
// rank, so that survivors can name it when the store goes away with it.
inline constexpr const char* kStoreServedByKey = "tpcomm/store/served_by";

}  // namespace tpcomm::control
