// Gloo's all_to_all, all_to_allv, gather and scatter, run on a job's staged call (the caller's
// buffers may be gone when an abandoned job ends). reduce needs none of its own: the backend
// runs it as an all-reduce whose result the root keeps, which reduces every type alike.
#pragma once

#include "gloo_group.hpp"
#include "transport/common/backend.hpp"

namespace tpcomm::transport {

void gloo_all_to_all(const GlooGroup& g, const Call& c);
// First every rank's counts, gathered and checked pair by pair on every rank (kMismatch alike on
// all of them: Gloo would abort the process on a message longer than its receive).
void gloo_all_to_allv(const GlooGroup& g, const Call& c);
void gloo_gather(const GlooGroup& g, const Call& c);
// Gloo's allgatherv (every rank's block of its count, into the staged output).
void gloo_all_gatherv(const GlooGroup& g, const Call& c);
void gloo_scatter(const GlooGroup& g, const Call& c);

}  // namespace tpcomm::transport
