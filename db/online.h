// The online runner's state (schema v5): submitted jobs, launches of gangs
// and forked copies, rounds, consolidations and learned throughputs. The
// runner, `submit`, `status` and `cancel` share one file (WAL), so each may
// run while the others do. sqlite3.h stays inside db/.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cellsched::db {

struct OnlineJob {
  int64_t id = 0;
  std::string name;
  double submitted_at = 0;  // unix seconds
  std::string job_type;     // throughput-table key ("" = unknown)
  std::string model;
  int batch_size = 0;
  double iterations = 0;  // total to train
  int gpus = 1;
  double weight = 1;
  std::vector<std::string> command;  // argv
  std::string checkpoint_dir;        // absolute
  std::string workdir;               // absolute; the processes start here
  // queued | running | done | failed | cancelled
  std::string state = "queued";
  double iterations_done = 0;  // consolidated into `checkpoint`
  std::string checkpoint;      // latest consolidated checkpoint ("" = none yet)
  int epoch = 0;               // bumps with each consolidation
  int failures = 0;
  std::string last_error;
  bool cancel_requested = false;
  double attained_gpu_s = 0;
  double first_start = -1;  // unix seconds, < 0 = never
  double finished_at = -1;

  bool finished() const { return state == "done" || state == "failed" || state == "cancelled"; }
};

// One process of a launch: the placement it serves.
struct OnlineProc {
  int node = 0;            // index into the runner's node list
  std::string node_name;
  int gpus = 0;
  std::string gpu_ids;     // "0,1" (what CUDA_VISIBLE_DEVICES gets locally)
  int64_t pid = 0;         // local supervisor process (0 = not started)
  int64_t start_ticks = 0; // its start time (/proc/PID/stat field 22): pid + this identify it
};

// The GPU indices of `gpu_ids` ("0,1" -> {0, 1}); a token that is not a
// plain index (a hand-edited database) is skipped, not thrown on.
std::vector<int> gpu_indices(const OnlineProc& p);

// A gang of a job (copy 0) or a forked copy (copy >= 1) in one epoch.
struct OnlineLaunch {
  int64_t id = 0;
  int64_t job_id = 0;
  int64_t round = 0;
  int copy = 0;
  int epoch = 0;
  // planned -> running -> (stopping ->) ended -> consolidated; planned -> abandoned
  std::string state = "planned";
  std::string executor;
  std::string token;
  std::string dir;
  std::string progress;
  std::string ckpt_in;
  std::string ckpt_out;
  std::vector<OnlineProc> procs;
  double iterations = 0;
  double started_at = -1;
  double ended_at = -1;
  std::string outcome;
};

struct OnlineRound {
  int64_t round = 0;
  double started_at = 0;
  std::string policy;
  double decision_ms = 0;
  std::string allocations;  // JSON
};

struct OnlineConsolidation {
  int64_t job_id = 0;
  int epoch = 0;  // the epoch it produced
  std::vector<std::pair<std::string, double>> inputs;  // checkpoint, iterations
  std::string output;
  double iterations = 0;
  std::string method;  // "average", "adopt", "best"
  double at = 0;
};

class OnlineStore {
 public:
  // Opens (creating and migrating, see Store::open) the database.
  static OnlineStore open(const std::string& path);
  OnlineStore(OnlineStore&&) noexcept;
  OnlineStore& operator=(OnlineStore&&) noexcept;
  ~OnlineStore();

  const std::string& path() const;

  // Runs `body` in one immediate transaction: all of its writes or none.
  void transaction(const std::function<void()>& body);

  // Inserts a queued job; returns its id (sets job.id).
  int64_t submit(OnlineJob& job);
  std::optional<OnlineJob> job(int64_t id) const;
  // Jobs in id (submission) order; `unfinished_only` skips done/failed/cancelled.
  std::vector<OnlineJob> jobs(bool unfinished_only) const;
  // Writes the runner-owned fields (state, progress, checkpoint, failures, ...).
  void update_job(const OnlineJob& job);
  // Sets cancel_requested; a queued job that never ran is cancelled at once.
  // Returns the job's state afterwards, nullopt when there is no such job.
  std::optional<std::string> request_cancel(int64_t id);

  int64_t insert_launch(OnlineLaunch& launch);
  void update_launch(const OnlineLaunch& launch);
  // Launches not yet consolidated or abandoned, in id order.
  std::vector<OnlineLaunch> live_launches() const;
  std::vector<OnlineLaunch> launches_of(int64_t job_id) const;

  void save_round(const OnlineRound& round);
  int64_t last_round() const;  // 0 when none
  std::optional<OnlineRound> round(int64_t r) const;

  void save_consolidation(const OnlineConsolidation& c);
  std::vector<OnlineConsolidation> consolidations(int64_t job_id) const;

  // Learned per-GPU iterations/s of a job on a GPU type.
  struct Throughput {
    int64_t job_id = 0;
    std::string gpu_type;
    double per_gpu = 0;
    long samples = 0;
  };
  void save_throughput(const Throughput& t);
  std::vector<Throughput> throughputs() const;

  void set_meta(const std::string& key, const std::string& value);
  std::optional<std::string> meta(const std::string& key) const;

  struct Impl;

 private:
  explicit OnlineStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// argv <-> JSON array of strings (the same encoding as the jobs table).
std::string encode_argv(const std::vector<std::string>& argv);
std::vector<std::string> decode_argv(const std::string& json);

}  // namespace cellsched::db
