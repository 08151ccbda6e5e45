#include "hvdtune/timeline/timeline_sink.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "trace_format.h"

namespace hvdtune::timeline {

using internal::Record;

struct TimelineSink::State {
  TimelineOptions options;
  int rank = 0;
  bool enabled = false;

  std::mutex mu;
  std::condition_variable wake;
  // The cycle thread fills `front`; the writer swaps it with `back` and
  // formats `back` without the lock.
  std::vector<Record> front, back;
  std::size_t front_count = 0;
  bool stopping = false;
  std::atomic<std::uint64_t> dropped{0};

  std::FILE* file = nullptr;
  bool write_failed = false;
  std::unique_ptr<internal::TraceFormatter> formatter;
  std::thread writer;

  // Slot for the next record, or null (counted as dropped) when full.
  // Called with `mu` held.
  Record* Slot() {
    if (front_count == front.size()) {
      dropped.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    Record* r = &front[front_count++];
    if (front_count == front.size() / 2) wake.notify_one();
    return r;
  }

  void Write(const std::string& text) {
    if (write_failed || text.empty()) return;
    if (std::fwrite(text.data(), 1, text.size(), file) != text.size() ||
        std::fflush(file) != 0) {
      write_failed = true;
      std::cerr << "[hvdtune rank " << rank
                << "] warning: cannot write the timeline " << options.path
                << " (" << std::strerror(errno)
                << "); no more timeline events are written" << std::endl;
    }
  }

  void Run() {
    std::string text;
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      wake.wait_for(lock, std::chrono::milliseconds(200), [&] {
        return stopping || front_count >= front.size() / 2;
      });
      const bool last = stopping;
      std::swap(front, back);
      const std::size_t n = front_count;
      front_count = 0;
      lock.unlock();
      text.clear();
      for (std::size_t i = 0; i < n; ++i) formatter->Append(back[i], text);
      Write(text);
      lock.lock();
      if (last && front_count == 0) return;
    }
  }
};

namespace {

// Opens the trace at `path` that an earlier runtime finished (its "\n]\n"
// trailer) for appending, positioned on the trailer; returns its t0. Leaves
// `file` null when there is none to continue.
std::optional<double> Resume(const std::string& path, std::FILE*& file) {
  std::FILE* f = std::fopen(path.c_str(), "r+");
  if (!f) return std::nullopt;
  std::string head(512, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), f));
  const auto origin = internal::TraceFormatter::ReadClockOrigin(head);
  char tail[3] = {};
  if (origin && std::fseek(f, -3, SEEK_END) == 0 &&
      std::fread(tail, 1, 3, f) == 3 && std::memcmp(tail, "\n]\n", 3) == 0 &&
      std::fseek(f, -3, SEEK_END) == 0) {
    file = f;
    return origin;
  }
  std::fclose(f);
  return std::nullopt;
}

}  // namespace

TimelineSink::TimelineSink(TimelineOptions options)
    : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
}

TimelineSink::~TimelineSink() { OnStop(); }

void TimelineSink::OnStart(const RuntimeInfo& info) {
  State& s = *state_;
  s.rank = info.rank;
  if (info.rank != 0 && !s.options.all_ranks) return;
  std::string path = s.options.path;
  if (s.options.all_ranks && info.size > 1) {
    path += "." + std::to_string(info.rank);
  }
  // In an elastic job a reset restarts the runtime: the new world's events
  // continue the file its previous world closed, on the same time axis.
  std::optional<double> origin;
  if (info.elastic.world > 0) origin = Resume(path, s.file);
  if (!s.file) s.file = std::fopen(path.c_str(), "w");
  if (!s.file) {
    std::cerr << "[hvdtune rank " << info.rank
              << "] warning: cannot open the timeline " << path << " ("
              << std::strerror(errno)
              << "; HOROVOD_TIMELINE); the job goes on without it" << std::endl;
    return;
  }
  s.front.resize(s.options.buffer_events);
  s.back.resize(s.options.buffer_events);
  s.formatter = std::make_unique<internal::TraceFormatter>(
      origin.value_or(RuntimeClock()));
  if (!origin) {
    std::string head = "[\n";
    s.formatter->AppendHeader(head);
    s.Write(head);
  }
  s.enabled = true;
  if (info.elastic.world >= 0) {
    Record& r = s.front[s.front_count++];
    r.kind = Record::Kind::kWorld;
    r.t[0] = RuntimeClock();
    r.number = static_cast<std::uint64_t>(info.elastic.world);
    r.bytes = info.size;
    r.name =
        info.elastic.last_reset.empty() ? "start" : info.elastic.last_reset;
    r.text.clear();
    for (const auto& [cause, n] : info.elastic.resets) {
      r.text += (r.text.empty() ? "" : ",") + cause + "=" + std::to_string(n);
    }
  }
  s.writer = std::thread([&s] { s.Run(); });
}

void TimelineSink::OnCycle(const CycleEvent& e) {
  State& s = *state_;
  if (!s.enabled || !s.options.mark_cycles || e.tensors == 0) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (Record* r = s.Slot()) {
    r->kind = Record::Kind::kCycle;
    r->t[0] = e.start;
    r->number = e.cycle;
  }
}

void TimelineSink::OnTensor(const TensorEvent& e) {
  State& s = *state_;
  if (!s.enabled) return;
  std::lock_guard<std::mutex> lock(s.mu);
  Record* r = s.Slot();
  if (!r) return;
  r->kind = Record::Kind::kTensor;
  r->name.assign(e.name);
  r->op = e.op;
  r->dtype = e.dtype;
  r->status = e.status;
  r->fused_with = e.fused_with;
  r->bytes = e.bytes;
  r->t[0] = e.enqueued;
  r->t[1] = e.negotiated;
  r->t[2] = e.started;
  r->t[3] = e.collective_started;
  r->t[4] = e.collective_finished;
  r->t[5] = e.finished;
}

void TimelineSink::OnKnobsApplied(const KnobsAppliedEvent& e) {
  State& s = *state_;
  if (!s.enabled) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (Record* r = s.Slot()) {
    r->kind = Record::Kind::kKnobs;
    r->t[0] = e.time;
    r->number = e.version;
    r->values = e.values;
    r->previous = e.previous;
  }
}

void TimelineSink::OnAutotuneSample(const AutotuneSampleEvent& e) {
  State& s = *state_;
  if (!s.enabled) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (Record* r = s.Slot()) {
    r->kind = Record::Kind::kSample;
    r->t[0] = e.time;
    r->number = static_cast<std::uint64_t>(e.index);
    r->to = e.phase;
    r->score = e.score;
    r->best_score = e.best_score;
    r->values = e.values;
  }
}

void TimelineSink::OnPhaseChange(const PhaseChangeEvent& e) {
  State& s = *state_;
  if (!s.enabled) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (Record* r = s.Slot()) {
    r->kind = Record::Kind::kPhase;
    r->t[0] = e.time;
    r->number = static_cast<std::uint64_t>(e.samples);
    r->from = e.from;
    r->to = e.to;
    r->score = e.score;
    r->best_score = e.reference_score;
    r->estimate = e.estimate;
    r->reference = e.reference;
    r->gain = e.gain;
    r->kept_initial = e.kept_initial;
    r->values = e.values;
  }
}

void TimelineSink::OnError(const ErrorEvent& e) {
  State& s = *state_;
  if (!s.enabled) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (Record* r = s.Slot()) {
    r->kind = Record::Kind::kError;
    r->t[0] = e.time;
    r->number = static_cast<std::uint64_t>(e.kind);
    r->name.assign(e.tensor);
    r->text.assign(e.message);
  }
}

void TimelineSink::OnStall(const StallEvent& e) {
  State& s = *state_;
  if (!s.enabled) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (Record* r = s.Slot()) {
    r->kind = Record::Kind::kStall;
    r->t[0] = e.time;
    r->number = e.shutdown ? 1 : 0;
    r->name.assign(e.tensor);
    r->text.clear();
    for (int rank : e.missing_ranks) {
      if (!r->text.empty()) r->text += ' ';
      r->text += std::to_string(rank);
    }
  }
}

void TimelineSink::OnStoreLookup(const StoreLookupEvent& e) {
  State& s = *state_;
  if (!s.enabled) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (Record* r = s.Slot()) {
    r->kind = Record::Kind::kStoreLookup;
    r->t[0] = e.time;
    r->number = static_cast<std::uint64_t>(e.result);
    r->name.assign(e.fingerprint);
  }
}

void TimelineSink::OnStop() {
  State& s = *state_;
  if (!s.enabled) return;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stopping = true;
  }
  s.wake.notify_one();
  s.writer.join();
  s.enabled = false;
  if (const std::uint64_t n = s.dropped.load()) {
    std::cerr << "[hvdtune rank " << s.rank << "] warning: the timeline "
              << s.options.path << " misses " << n
              << " events (its writer fell behind)" << std::endl;
  }
  s.Write("\n]\n");
  std::fclose(s.file);
  s.file = nullptr;
}

std::uint64_t TimelineSink::dropped() const { return state_->dropped.load(); }

}  // namespace hvdtune::timeline
