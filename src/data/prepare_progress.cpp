#include "data/prepare_progress.h"

#include <cmath>

#include "core/log.h"

namespace lmtrain::data {
namespace {

std::string duration_text(double s) {
  if (s < 0) return "?";
  const auto t = static_cast<long long>(std::llround(s));
  if (t >= 3600) return log::format("%lldh%02lldm", t / 3600, (t / 60) % 60);
  if (t >= 60) return log::format("%lldm%02llds", t / 60, t % 60);
  return log::format("%llds", t);
}

}  // namespace

void log_prepare_progress(const PrepareProgress& p) {
  const double pct = p.bytes_total ? 100.0 * p.bytes_done / p.bytes_total : 100.0;
  std::string line =
      log::format("prepare %s: %.2f / %.2f MB (%.1f%%), %.1f MB/s", p.phase.c_str(),
                  p.bytes_done / 1e6, p.bytes_total / 1e6, pct, p.bytes_per_second / 1e6);
  if (p.phase != "hash") {  // checksums read bytes, not documents
    line += log::format(", %llu documents", static_cast<unsigned long long>(p.documents));
  }
  line += p.finished ? ", done in " + duration_text(p.seconds)
                     : ", ETA " + duration_text(p.eta_seconds);
  log::info(line);
}

ProgressMeter::ProgressMeter(PrepareProgressFn fn, std::string phase, uint64_t bytes_total,
                             double every_seconds, uint64_t bytes_start, uint64_t documents_start)
    : fn_(fn ? std::move(fn) : PrepareProgressFn(log_prepare_progress)),
      every_(every_seconds),
      bytes_start_(bytes_start),
      t0_(Clock::now()),
      // The first update reports at once: a display that starts its clock there times the
      // whole phase (one that first heard of it at the end printed "227M bytes in 0.0s").
      last_(t0_ - std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(every_seconds + 1))) {
  p_.phase = std::move(phase);
  p_.bytes_total = bytes_total;
  p_.bytes_done = bytes_start;
  p_.documents = documents_start;
}

void ProgressMeter::update(uint64_t bytes_done, uint64_t documents) {
  const auto now = Clock::now();
  if (std::chrono::duration<double>(now - last_).count() < every_) return;
  last_ = now;
  report(bytes_done, documents, false);
}

void ProgressMeter::finish(uint64_t bytes_done, uint64_t documents) {
  report(bytes_done, documents, true);
}

void ProgressMeter::report(uint64_t bytes_done, uint64_t documents, bool finished) {
  p_.bytes_done = bytes_done;
  p_.documents = documents;
  p_.finished = finished;
  p_.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
  const double done_here = bytes_done > bytes_start_ ? double(bytes_done - bytes_start_) : 0.0;
  p_.bytes_per_second = p_.seconds > 0 ? done_here / p_.seconds : 0.0;
  p_.eta_seconds = p_.bytes_per_second > 0 && p_.bytes_total >= bytes_done
                       ? double(p_.bytes_total - bytes_done) / p_.bytes_per_second
                       : -1.0;
  fn_(p_);
}

}  // namespace lmtrain::data
