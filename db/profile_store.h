// Profiles in the SQLite store: one ProfileRun (provenance + its layer or
// collective records) per row of profile_runs, saved in one transaction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/profile.h"

namespace cellsched::db {

struct ProfileSummary {
  int64_t id = 0;
  std::string created_at, kind, model, device, device_type, host, timer;
  int threads = 0, repetitions = 0;
  long records = 0;  // layer or collective records
};

class ProfileStore {
 public:
  // Opens (creating if missing) and migrates like Store::open; ":memory:" works.
  static ProfileStore open(const std::string& path);
  ProfileStore(ProfileStore&&) noexcept;
  ProfileStore& operator=(ProfileStore&&) noexcept;
  ~ProfileStore();

  // Checks the run (InputError naming the bad record; nothing written), then
  // saves it and its records in one transaction. Sets run.id and, when empty,
  // run.created_at (UTC ISO 8601). Returns the id.
  int64_t save(ProfileRun& run);
  std::optional<ProfileRun> load(int64_t id) const;
  std::vector<ProfileSummary> list() const;  // newest first
  // The newest compute run of `model` on `device_type` ("" = any) that has
  // layers at tp 1 (what every estimate needs); 0 if none.
  int64_t latest_compute(const std::string& model, const std::string& device_type = "") const;

  struct Impl;

 private:
  explicit ProfileStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Checks a run for storing: kind, names, finite non-negative figures.
// Throws InputError ("profile run: layer 3: negative fwd_ms").
void validate_profile_run(const ProfileRun& run);

}  // namespace cellsched::db
