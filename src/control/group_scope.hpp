// A group's identity on a store that other groups may share (docs/store.md, "Threat model"). Every
// key a group writes lives under tpcomm/g/<group id>/, each rank claims its slot there, and a group
// that meets a second process for one of its ranks, or a second anonymous group on its store, is
// marked broken so that every rank of both fails with an error that says so.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "tpcomm/store.hpp"

namespace tpcomm::control {

// Within the group's scope: slot/<rank>, held (ephemeral) by each rank's process while it lives.
inline constexpr const char* kSlotPrefix = "slot/";

// The group's name from the environment: TPCOMM_GROUP_ID (tpcomm run sets it), else torchrun's
// TORCHELASTIC_RUN_ID (unless "none") with its restart count, else the MPI job (PMIX_NAMESPACE,
// OMPI_MCA_ess_base_jobid), else the Slurm job and step. nullopt: anonymous.
std::optional<std::string> group_id_from_environment();

// A view of `inner` whose keys are all under `prefix` (wait_for answers without it).
std::shared_ptr<Store> make_prefixed_store(std::shared_ptr<Store> inner, std::string prefix);

// Joins the group on `store` as `rank`: an anonymous group's rank 0 claims the store with a new
// token that the other ranks adopt; every rank claims its slot. Returns the group's view of the
// store. Throws kMismatch when the store serves another anonymous group or the rank's slot is
// taken (and marks the group broken), kTimeout when rank 0's claim does not appear in time.
std::shared_ptr<Store> join_group(std::shared_ptr<Store> store, const std::string& where,
                                  const std::optional<std::string>& group_id, int rank,
                                  const Deadline& deadline);

// Throws kMismatch with the recorded reason when the group was marked broken.
void check_group_intact(Store& group_store);

}  // namespace tpcomm::control
