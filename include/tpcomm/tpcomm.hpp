// Everything an application needs: bootstraps, the communicator, element types.
#pragma once

#include "tpcomm/bootstrap.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/types.hpp"
