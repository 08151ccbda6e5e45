// One enqueued collective as the cycle thread holds it.
#pragma once

#include <memory>

#include "handle_state.h"
#include "message.h"

namespace hvdtune::internal {

struct TensorEntry {
  Request request;
  const void* input = nullptr;
  void* output = nullptr;
  std::shared_ptr<HandleState> handle;
  /// Runtime clock: when the application enqueued it, and when every rank
  /// had agreed to run it.
  double enqueued = 0;
  double negotiated = 0;
};

}  // namespace hvdtune::internal
