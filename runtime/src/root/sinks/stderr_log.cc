#include "root/sinks/stderr_log.h"

#include <iomanip>
#include <iostream>
#include <sstream>

namespace hvdtune::internal {
namespace {

std::string Gbps(double bytes_per_second) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << bytes_per_second / 1e9 << " GB/s";
  return os.str();
}

std::string Ranks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

void StderrLogSink::OnPhaseChange(const PhaseChangeEvent& e) {
  std::ostringstream os;
  os << "[hvdtune] autotune: ";
  if (e.to == AutotunePhase::kFrozen && e.samples == 0 && e.score == 0) {
    os << "every tunable knob is pinned; nothing to tune";
  } else if (e.to == AutotunePhase::kFrozen) {
    const double gain =
        e.reference_score > 0 ? (e.score / e.reference_score - 1) * 100 : 0;
    os << "frozen after " << e.samples << " samples: " << e.values.ToString()
       << " at " << Gbps(e.score);
    if (e.reference_score > 0) {
      os << " (initial " << Gbps(e.reference_score) << ", " << std::showpos
         << std::fixed << std::setprecision(1) << gain << std::noshowpos
         << "%)";
      if (e.exploration_seconds > 0) {
        os << "; exploring took " << std::setprecision(1)
           << e.exploration_seconds << " s of steps and ";
        if (e.exploration_loss_seconds > 0) {
          os << "cost " << e.exploration_loss_seconds << " s of training";
        } else {
          os << "gained " << -e.exploration_loss_seconds << " s of training";
        }
        os << " against the initial configuration";
      }
    } else {
      // Applied from the store: the initial configuration never ran.
      os << " (the initial configuration was not measured)";
    }
  } else if (e.to == AutotunePhase::kRetuning) {
    if (e.reference_score > 0) {
      os << "score " << (e.score < e.reference_score ? "fell" : "rose")
         << " from " << Gbps(e.reference_score) << " to " << Gbps(e.score)
         << " (" << std::showpos << std::fixed << std::setprecision(1)
         << (e.score / e.reference_score - 1) * 100 << std::noshowpos
         << "%, lasting)";
    } else {
      os << "score changed to " << Gbps(e.score);
    }
    os << "; the conditions changed, re-tuning around the incumbent";
  } else {
    return;  // warm-up -> exploring is not news
  }
  std::cerr << os.str() + "\n" << std::flush;
}

void StderrLogSink::OnStall(const StallEvent& e) {
  // The negotiation's own wait was already warned about as it happened.
  if (e.tensor.empty()) return;
  std::ostringstream os;
  os << "[hvdtune rank " << rank_ << "] WARNING: tensor '" << e.tensor
     << "' has waited " << std::fixed << std::setprecision(1)
     << e.waited_seconds << " s for rank"
     << (e.missing_ranks.size() > 1 ? "s " : " ") << Ranks(e.missing_ranks)
     << (e.shutdown ? "; failing it on the ranks that submitted it "
                      "(HOROVOD_STALL_SHUTDOWN_TIME_SECONDS)"
                    : " (stalled: those ranks have not submitted it; "
                      "HOROVOD_STALL_CHECK_TIME_SECONDS)")
     << '\n';
  std::cerr << os.str() << std::flush;
}

void StderrLogSink::OnError(const ErrorEvent& e) {
  if (e.kind != ErrorEvent::Kind::kAutotune) return;  // handles carry the rest
  std::cerr << "[hvdtune rank " + std::to_string(rank_) +
                   "] WARNING: " + e.message + "\n"
            << std::flush;
}

}  // namespace hvdtune::internal
