// Allreduces one tensor through an installed hvdtune and checks the sum.
#include <hvdtune/runtime.h>

#include <cstdio>
#include <vector>

int main() {
  hvdtune::Runtime rt;
  std::vector<double> x(1000, rt.rank() + 1.0), y(x.size());
  const std::int64_t shape[] = {static_cast<std::int64_t>(x.size())};
  const hvdtune::Status s =
      rt.Allreduce("downstream", x.data(), y.data(), shape,
                   hvdtune::DataType::kFloat64, hvdtune::ReduceOp::kSum)
          .Wait();
  const double want = rt.size() * (rt.size() + 1) / 2.0;
  if (!s.ok() || y[999] != want) {
    std::fprintf(stderr, "rank %d: %s, got %g want %g\n", rt.rank(),
                 s.ToString().c_str(), y[999], want);
    return 1;
  }
  if (rt.rank() == 0) std::printf("downstream: ok on %d ranks\n", rt.size());
  return 0;
}
