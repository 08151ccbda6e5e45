// Store: chooses the backend from the location and forwards to it. What
// both backends share (Dump over the listing queries, the location's
// display form) is here.
#include <string_view>

#include "backend.h"
#include "hvdtune/store/store.h"
#include "pg_backend.h"
#include "sqlite_backend.h"

namespace hvdtune::store {

bool IsServerLocation(const std::string& location) {
  const std::string_view s(location);
  return s.starts_with("postgresql://") || s.starts_with("postgres://");
}

std::string DisplayLocation(const std::string& location) {
  return IsServerLocation(location) ? internal::PgDisplayName(location)
                                    : location;
}

Store::Store(StoreOptions options) : display_(DisplayLocation(options.path)) {
  if (IsServerLocation(options.path)) {
    backend_ = std::make_unique<internal::PgBackend>(std::move(options));
  } else {
    backend_ = std::make_unique<internal::SqliteBackend>(std::move(options));
  }
}

Store::~Store() = default;

const char* Store::backend() const {
  return backend_->sqlite_handle() ? "sqlite" : "postgresql";
}
int Store::schema_version() const { return backend_->schema_version(); }
std::string Store::journal_mode() const { return backend_->journal_mode(); }
std::string Store::network_fs() const { return backend_->network_fs(); }
sqlite3* Store::db() { return backend_->sqlite_handle(); }

std::int64_t Store::PutFingerprint(const std::string& kind,
                                   const Fingerprint& fp) {
  return backend_->PutFingerprint(kind, fp);
}
std::optional<std::int64_t> Store::FindFingerprint(const std::string& kind,
                                                   const std::string& hash) {
  return backend_->FindFingerprint(kind, hash);
}
std::int64_t Store::BeginRun(std::int64_t hardware, std::int64_t model,
                             const std::string& version,
                             const std::string& source, double started) {
  return backend_->BeginRun(hardware, model, version, source, started);
}
void Store::EndRun(std::int64_t run, const std::string& status, double ended) {
  backend_->EndRun(run, status, ended);
}
std::optional<RunInfo> Store::GetRun(std::int64_t run) {
  return backend_->GetRun(run);
}
void Store::AddSamples(std::int64_t run, const std::vector<Sample>& samples) {
  backend_->AddSamples(run, samples);
}
std::vector<Sample> Store::RunSamples(std::int64_t run) {
  return backend_->RunSamples(run);
}
std::vector<Sample> Store::PairSamples(std::int64_t hardware,
                                       std::int64_t model, int limit) {
  return backend_->PairSamples(hardware, model, limit);
}
PairLookup Store::Lookup(const std::string& hardware_hash,
                         const std::string& model_hash, int limit) {
  return backend_->Lookup(hardware_hash, model_hash, limit);
}
void Store::SetBest(std::int64_t hardware, std::int64_t model,
                    const Best& best) {
  backend_->SetBest(hardware, model, best);
}
std::optional<Best> Store::GetBest(std::int64_t hardware, std::int64_t model) {
  return backend_->GetBest(hardware, model);
}
std::vector<KnownPair> Store::KnownPairs() { return backend_->KnownPairs(); }
std::vector<PairSummary> Store::ListPairs() { return backend_->ListPairs(); }
std::vector<RunInfo> Store::PairRuns(std::int64_t hardware,
                                     std::int64_t model) {
  return backend_->PairRuns(hardware, model);
}
MergeStats Store::Merge(const std::vector<PairRecord>& pairs, bool dry_run) {
  return backend_->Merge(pairs, dry_run);
}
std::string Store::IntegrityCheck() { return backend_->IntegrityCheck(); }

PairLookup internal::Backend::Lookup(const std::string& hardware_hash,
                                     const std::string& model_hash, int limit) {
  PairLookup out;
  out.hardware = FindFingerprint("hardware", hardware_hash);
  out.model = FindFingerprint("model", model_hash);
  if (out.hardware && out.model) {
    out.best = GetBest(*out.hardware, *out.model);
    out.samples = PairSamples(*out.hardware, *out.model, limit);
  }
  return out;
}

std::vector<PairRecord> Store::Dump() {
  std::vector<PairRecord> out;
  for (const PairSummary& p : ListPairs()) {
    PairRecord rec;
    rec.hardware = p.hardware_fp;
    rec.model = p.model_fp;
    rec.best = p.best;
    for (RunInfo& run : PairRuns(p.hardware, p.model)) {
      if (rec.best && rec.best->run == run.id) {
        rec.best_run = static_cast<int>(rec.runs.size());
      }
      std::vector<Sample> samples = RunSamples(run.id);
      rec.runs.push_back({std::move(run), std::move(samples)});
    }
    if (rec.best) rec.best->run = 0;
    out.push_back(std::move(rec));
  }
  return out;
}

}  // namespace hvdtune::store
