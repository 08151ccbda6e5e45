#include "hvdtune/store/fingerprint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

namespace hvdtune::store {
namespace {

std::string Trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

// The value after "key:" on the first line of `path` that starts with `key`.
std::string FieldOf(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) return Trim(line.substr(colon + 1));
  }
  return {};
}

// Values must not contain the separators of Text().
std::string Clean(std::string v) {
  std::replace(v.begin(), v.end(), '\n', ' ');
  return Trim(std::move(v));
}

struct Shape {
  std::string dtype;
  std::int64_t elements = 0;
};

std::vector<Shape> ParseShapes(const std::string& list) {
  std::vector<Shape> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) continue;
    Shape s;
    s.dtype = item.substr(0, colon);
    try {
      s.elements = std::stoll(item.substr(colon + 1));
    } catch (const std::exception&) {
      continue;
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

std::string Fingerprint::Text() const {
  std::string out;
  for (const auto& [k, v] : parts) out += k + "=" + v + "\n";
  return out;
}

std::string Fingerprint::Hash() const {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : Text()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string Fingerprint::Get(const std::string& key) const {
  for (const auto& [k, v] : parts) {
    if (k == key) return v;
  }
  return {};
}

Fingerprint Fingerprint::FromText(const std::string& text) {
  Fingerprint fp;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    fp.parts.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return fp;
}

HostFacts ProbeHost() {
  HostFacts h;
  h.cpu_model = Clean(FieldOf("/proc/cpuinfo", "model name"));
  if (h.cpu_model.empty())
    h.cpu_model = Clean(FieldOf("/proc/cpuinfo", "cpu model"));
  h.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  std::error_code ec;
  const std::filesystem::path gpus("/proc/driver/nvidia/gpus");
  if (std::filesystem::is_directory(gpus, ec)) {
    std::vector<std::string> models;
    for (const auto& d : std::filesystem::directory_iterator(gpus, ec)) {
      models.push_back(
          Clean(FieldOf((d.path() / "information").string(), "Model")));
    }
    std::sort(models.begin(), models.end());
    h.gpu_count = static_cast<int>(models.size());
    if (!models.empty()) h.gpu_model = models.front();
  }
  std::ifstream driver("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(driver, line)) {
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..."
    std::stringstream ss(line);
    std::string word;
    while (ss >> word) {
      if (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0])) &&
          word.find('.') != std::string::npos) {
        h.gpu_driver = word;
        break;
      }
    }
  }
  std::ifstream cuda("/usr/local/cuda/version.json");
  std::string json((std::istreambuf_iterator<char>(cuda)),
                   std::istreambuf_iterator<char>());
  const auto at = json.find("\"cuda\"");
  if (at != std::string::npos) {
    const auto v = json.find("\"version\"", at);
    const auto q1 = v == std::string::npos ? v : json.find('"', v + 9);
    const auto q2 = q1 == std::string::npos ? q1 : json.find('"', q1 + 1);
    if (q2 != std::string::npos)
      h.cuda_version = json.substr(q1 + 1, q2 - q1 - 1);
  }
  return h;
}

Fingerprint HardwareFingerprint(const HostFacts& host, const JobFacts& job) {
  Fingerprint fp;
  auto add = [&](std::string k, std::string v) {
    fp.parts.emplace_back(std::move(k), Clean(std::move(v)));
  };
  add("cpu_model", host.cpu_model);
  add("cpu_cores", std::to_string(host.cpu_cores));
  add("gpu_model", host.gpu_model);
  add("gpu_count", std::to_string(host.gpu_count));
  add("gpu_driver", host.gpu_driver);
  add("cuda", host.cuda_version);
  add("backend", job.backend);
  add("mpi", job.mpi_version);
  add("nccl", job.nccl_version);
  add("world_size", std::to_string(job.world_size));
  add("ranks_per_node", std::to_string(job.ranks_per_node));
  add("nodes", std::to_string(job.nodes));
  return fp;
}

Fingerprint ModelFingerprint(const std::vector<TensorShape>& step) {
  std::int64_t total = 0;
  std::string list;
  for (const TensorShape& t : step) {
    total += t.elements;
    if (!list.empty()) list += ",";
    list += Clean(t.dtype) + ":" + std::to_string(t.elements);
  }
  Fingerprint fp;
  fp.parts.emplace_back("tensors", std::to_string(step.size()));
  fp.parts.emplace_back("elements", std::to_string(total));
  fp.parts.emplace_back("shapes", list);
  return fp;
}

double HardwareSimilarity(const Fingerprint& a, const Fingerprint& b) {
  static const char* const kLayout[] = {"world_size", "ranks_per_node",
                                        "nodes"};
  auto is_layout = [](const std::string& k) {
    return std::find(std::begin(kLayout), std::end(kLayout), k) !=
           std::end(kLayout);
  };
  // Every part but the layout must agree, in both directions.
  for (const auto* x : {&a, &b}) {
    const Fingerprint& y = x == &a ? b : a;
    for (const auto& [k, v] : x->parts) {
      if (!is_layout(k) && y.Get(k) != v) return 0;
    }
  }
  int differ = 0;
  for (const char* k : kLayout) differ += a.Get(k) != b.Get(k) ? 1 : 0;
  return differ == 0 ? 1.0 : differ == 1 ? 0.75 : 0.5;
}

double ModelSimilarity(const Fingerprint& a, const Fingerprint& b) {
  if (a.Text() == b.Text()) return 1;
  const std::vector<Shape> x = ParseShapes(a.Get("shapes"));
  const std::vector<Shape> y = ParseShapes(b.Get("shapes"));
  if (x.empty() || y.empty()) return 0;
  double ex = 0, ey = 0;
  for (const Shape& s : x) ex += static_cast<double>(s.elements);
  for (const Shape& s : y) ey += static_cast<double>(s.elements);
  const double size_ratio =
      std::max(ex, ey) > 0 ? std::min(ex, ey) / std::max(ex, ey) : 1.0;
  bool same_layers = x.size() == y.size();
  for (std::size_t i = 0; same_layers && i < x.size(); ++i) {
    same_layers = x[i].dtype == y[i].dtype;
  }
  if (same_layers) return 0.5 + 0.5 * size_ratio;
  const double count_ratio = static_cast<double>(std::min(x.size(), y.size())) /
                             static_cast<double>(std::max(x.size(), y.size()));
  return 0.49 * size_ratio * count_ratio;
}

std::string PrintableFingerprint(const Fingerprint& hardware,
                                 const Fingerprint& model) {
  return hardware.Hash() + "-" + model.Hash();
}

}  // namespace hvdtune::store
