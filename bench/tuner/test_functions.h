#pragma once

// Analytic objectives shared by the tuner benchmark and tests. Each is
// defined in natural units over a SearchSpace; Value() is the noiseless
// function to MINIMISE (optimizers are fed -Value(), plus noise if any).

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "hvdtune/tuner/search_space.h"

namespace hvdtune::tuner::testing {

/// Branin-Hoo on [-5, 10] x [0, 15]; three global minima, f* = 0.397887.
struct Branin {
  static constexpr double kOptimum = 0.397887357729739;
  static SearchSpace Space() {
    return SearchSpace({Dimension::Continuous("x1", -5, 10),
                        Dimension::Continuous("x2", 0, 15)});
  }
  static double Value(const Config& x) {
    constexpr double kPi = std::numbers::pi;
    const double b = 5.1 / (4 * kPi * kPi), c = 5 / kPi, t = 1 / (8 * kPi);
    const double u = x[1] - b * x[0] * x[0] + c * x[0] - 6;
    return u * u + 10 * (1 - t) * std::cos(x[0]) + 10;
  }
};

/// Hartmann-6 on [0, 1]^6; f* = -3.32237.
struct Hartmann6 {
  static constexpr double kOptimum = -3.32236801141551;
  static SearchSpace Space() {
    std::vector<Dimension> dims;
    for (int i = 0; i < 6; ++i) {
      std::string name =
          "x";  // not "x" + ...: GCC 12 -Wrestrict false positive
      name += std::to_string(i);
      dims.push_back(Dimension::Continuous(name, 0, 1));
    }
    return SearchSpace(dims);
  }
  static double Value(const Config& x) {
    static constexpr double kAlpha[4] = {1.0, 1.2, 3.0, 3.2};
    static constexpr double kA[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                        {0.05, 10, 17, 0.1, 8, 14},
                                        {3, 3.5, 1.7, 10, 17, 8},
                                        {17, 8, 0.05, 10, 0.1, 14}};
    static constexpr double kP[4][6] = {
        {0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
        {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
        {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
        {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
    double sum = 0;
    for (int i = 0; i < 4; ++i) {
      double inner = 0;
      for (int j = 0; j < 6; ++j) {
        const double d = x[j] - kP[i][j];
        inner += kA[i][j] * d * d;
      }
      sum += kAlpha[i] * std::exp(-inner);
    }
    return -sum;
  }
};

/// A plausible "collective throughput" surface: the step time of a
/// data-parallel job whose gradients are allreduced by a cycle-driven
/// fusion runtime, returned as -throughput (GB/s) so that it is minimised.
///
/// Knobs: fusion threshold F (bytes, log 1 MiB..256 MiB), cycle time c (ms,
/// log 0.1..50), ring segment size S (bytes, log 64 KiB..64 MiB), algorithm
/// {native, ring, hierarchical}.
///
/// Workload: G = 256 MiB of gradients per step, produced evenly over a
/// backward pass of T = 40 ms, on 16 ranks (2 nodes x 8).
///  - Each cycle costs kappa = 0.25 ms of coordination on the background
///    thread and slows compute by 0.04 ms / c (CPU contention), so tiny
///    cycles hurt; data ready in a cycle waits on average c/2 and the last
///    tensors wait a whole cycle, so long cycles hurt: a narrow-ish optimum
///    on a log axis.
///  - Bytes ready per cycle b = G min(c, T)/T are packed into
///    k = ceil(b / F) buffers of b/k bytes.
///  - Allreduce of m bytes, alpha-beta model per algorithm:
///      native (recursive doubling / Rabenseifner): 0.16 ms + 0.195 ns/B;
///      ring: 0.6 ms + 0.15 ns/B, pipelined in segments of S: each segment
///        adds 15 us launch cost, and the reduction of one segment (at
///        20 GB/s) is not overlapped: + ceil(m/S) 15 us + min(S, m)/20 GB/s;
///      hierarchical (intra-node reduce-scatter, inter-node ring, gather):
///        1.2 ms + 0.135 ns/B, with the same segmenting on both levels
///        (twice the per-segment cost).
///  - Per cycle, communication takes tau = kappa + k t(b/k). If tau > c the
///    backlog stretches the backward pass by tau/c.
///  - Step = T (1 + 0.04/c) max(1, tau/c) + c/2 + kappa + t(b/k) (tail).
/// Throughput = G / step. f* is found by a dense search (OptimumValue()).
struct CollectiveThroughput {
  static SearchSpace Space() {
    return SearchSpace(
        {Dimension::Continuous("fusion_threshold_bytes", 1 << 20, 256 << 20,
                               true),
         Dimension::Continuous("cycle_time_ms", 0.1, 50, true),
         Dimension::Continuous("segment_bytes", 64 << 10, 64 << 20, true),
         Dimension::Categorical("algorithm", 3)});
  }
  static double AllreduceSeconds(int algorithm, double m, double s) {
    const double segments = std::ceil(m / s);
    const double fill = std::min(s, m) / 20e9;
    switch (algorithm) {
      case 0:
        return 0.16e-3 + 0.195e-9 * m;
      case 1:
        return 0.6e-3 + 0.15e-9 * m + segments * 15e-6 + fill;
      default:
        return 1.2e-3 + 0.135e-9 * m + 2 * (segments * 15e-6 + fill);
    }
  }
  static double Value(const Config& x) {
    const double g = 256.0 * (1 << 20), t = 40e-3, kappa = 0.25e-3;
    const double fusion = x[0], c = x[1] * 1e-3, seg = x[2];
    const int algorithm = static_cast<int>(x[3]);
    const double ready = g * std::min(c, t) / t;
    const double buffers = std::ceil(ready / fusion);
    const double per_buffer = AllreduceSeconds(algorithm, ready / buffers, seg);
    const double tau = kappa + buffers * per_buffer;
    const double step = t * (1 + 0.04e-3 / c) * std::max(1.0, tau / c) + c / 2 +
                        kappa + per_buffer;
    return -(g / step) * 1e-9;
  }
  /// Noiseless optimum by a log-grid search refined by coordinate descent.
  static double OptimumValue() {
    static const double kValue = [] {
      const SearchSpace space = Space();
      double best = std::numeric_limits<double>::infinity();
      Eigen::VectorXd best_u(4);
      const int n = 120;
      Eigen::VectorXd u(4);
      for (int a = 0; a < 3; ++a) {
        u[3] = a;
        for (int i = 0; i <= n; ++i) {
          for (int j = 0; j <= n; ++j) {
            for (int k = 0; k <= n; ++k) {
              u[0] = double(i) / n, u[1] = double(j) / n, u[2] = double(k) / n;
              const double v = Value(space.FromUnit(u));
              if (v < best) best = v, best_u = u;
            }
          }
        }
      }
      for (double step = 1.0 / n; step > 1e-7; step *= 0.5) {
        for (bool improved = true; improved;) {
          improved = false;
          for (int d = 0; d < 3; ++d) {
            for (double sign : {-1.0, 1.0}) {
              Eigen::VectorXd trial = best_u;
              trial[d] = std::clamp(trial[d] + sign * step, 0.0, 1.0);
              const double v = Value(space.FromUnit(trial));
              if (v < best) best = v, best_u = trial, improved = true;
            }
          }
        }
      }
      return best;
    }();
    return kValue;
  }
};

}  // namespace hvdtune::tuner::testing
