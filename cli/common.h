// Shared pieces of the command-line front end.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "core/fork.h"

namespace cellsched {
struct PolicySettings;  // scheduler/policy.h
}

namespace cellsched::cli {

namespace po = boost::program_options;

// A verb: `cellsched <name> ...`. `run` gets the arguments after the verb and
// returns the exit status; InputError -> 2, other errors -> 1 (handled by main).
struct Verb {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

// Runs a verb with the shared error handling: InputError and bad usage print
// "cellsched VERB: ..." and give 2, other errors 1.
int run_verb(const Verb& v, const std::vector<std::string>& args);

// With CELLSCHED_MAPS_OUT=FILE in the environment, appends the process's
// memory map (/proc/self/maps), then its /proc/self/status (threads, CPUs
// allowed), to FILE: how the tests check which libraries a verb loaded and
// which threads it left. Called by both executables just before they exit.
void write_maps_if_asked();
// main() of both executables: dispatch(argv[1..]), then write_maps_if_asked().
int run_main(int argc, char** argv, int (*dispatch)(const std::vector<std::string>&));

// The verbs that need LibTorch or the CUDA libraries (profile, validate) live
// in a second executable, cellsched-torch, beside this one (or at
// $CELLSCHED_TORCH). This replaces the process with it (same verb, same
// arguments); when it is missing, says so and returns 1.
int exec_torch_helper(const std::string& verb, const std::vector<std::string>& args);
// Path of that executable ("" when it is not there).
std::string torch_helper_path();

// Parses `args` against `options` (+ positional), prints help and returns
// false when --help was given. Throws InputError on bad usage.
bool parse(const std::string& usage, const std::vector<std::string>& args,
           const po::options_description& options, const po::positional_options_description& pos,
           po::variables_map& vm);

// Default database path and the bundled data directory (examples/data).
std::string default_db_path();
std::string data_dir();
// `--throughputs` default: the bundled Gavel table.
std::string default_throughputs();

// Help texts of the trace-reading options shared by simulate, schedule and
// trace inspect/convert.
inline constexpr const char* kTraceFormatHelp =
    "trace format: auto (by header) | gavel | gavel-legacy | philly | csv | tiresias | crius | "
    "pollux | alibaba-pods | alibaba-pai (headerless task table) | philly-raw (cluster_job_log JSON) "
    "| helios";
inline constexpr const char* kModelMapHelp =
    "Tiresias model names / Pollux applications onto job types, e.g. "
    "'vgg16=ResNet-50 (batch size 64),alexnet=ResNet-18' (a model picks the batch; model@batch "
    "names a zoo model)";
inline constexpr const char* kGpuMapHelp =
    "Alibaba GPU models onto catalogue types, e.g. G2=t4,G3=a10 (2023) or MISC=p100 (PAI 2020)";

// "a, b,,c" -> {"a", "b", "c"}: items trimmed, empty ones dropped.
std::vector<std::string> split_list(const std::string& s);

// Every policy of this build, comma-separated (the --policy default).
std::string all_policies();

// True when stderr is a terminal (progress goes there only then).
bool stderr_is_tty();

// A progress line for a simulation on stderr, only when it is a terminal (else
// empty): "LABEL: simulated 123.4 h, 500/82247 jobs done, 812 rounds/s",
// redrawn at most 5 times a second. clear_progress() wipes it.
std::function<void(double, long, long)> sim_progress(const std::string& label);
// Redraws the one progress line on stderr with `line`, when it is a terminal.
void show_progress(const std::string& line);
void clear_progress();

// Simple aligned text table.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Column `i` left-aligned (the first always is; numbers are right-aligned).
  void left_align(size_t i) { left_.push_back(i); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<size_t> left_;
  std::vector<std::vector<std::string>> rows_;
};

std::string fixed(double v, int decimals);
// Short: whole numbers in full (below 1e15), others %g; nan/inf as such
// (for messages about bad numbers, params and counts).
std::string num(double v);
// "1 node", "3 nodes": a count with its noun, plural unless one.
std::string count_of(long n, const std::string& noun);

// --fork-efficiency, shared by simulate/schedule, sweep and run: the value
// defaults to kDefaultForkEfficiency (core/job.h) and prints it as such.
po::typed_value<double>* fork_efficiency_value(double* target);
inline const char* const kForkEfficiencyHelp =
    "hadare: what the first forked copy adds, as a share of its iterations, (0, 1]; the default is measured "
    "(docs/hadar.md)";
// --fork-efficiency and --fork-scaling checked, or an InputError naming the
// flag and its range.
ForkModel fork_model_arg(double efficiency, const std::string& scaling);
inline const char* const kForkScalingHelp =
    "hadare: how copies add up: noise (each further copy adds less, as a larger batch does; measured) or "
    "linear (every copy adds --fork-efficiency of its iterations)";
// --hadar-spare-exponent, --hadar-ratio-exponent and --hadar-ratio-cap,
// shared by simulate/schedule and sweep, defaulting to *s's values; and
// their check (InputError naming the flag and its range).
void add_hadar_options(po::options_description& opt, PolicySettings* s);
void check_policy_settings(const PolicySettings& s);
// Throws InputError "--FLAG must be a number in [lo, hi], got v" unless v is finite and in range.
void check_flag_range(const char* flag, double v, double lo, double hi);
// --seed's value, default 0: a whole number in [0, 2^64 - 1]. A plain
// uint64_t option took "-1" as 2^64 - 1; this one names it (InputError).
po::typed_value<std::string>* seed_value(uint64_t* target);
// --limit N: N >= 1 jobs, or -1 (the default) for all; InputError otherwise.
void check_limit(long limit);
// --reference-gpu's value as the catalogue's canonical name; InputError
// naming the flag and the known types when the catalogue lacks it, whether
// or not the trace format uses it.
std::string reference_gpu_flag(const std::string& name);
// For a file written after long work: throws InputError "--FLAG PATH: ..."
// now unless its folder exists and is writable and PATH is not a folder nor
// an SQLite database (or its -wal, -shm, -journal). Creates nothing.
void check_out_file(const char* flag, const std::string& path);
// The same for a folder the outputs go in: created now if missing; else
// InputError "PATH: --FLAG must be a directory that can be created".
void check_out_dir(const char* flag, const std::string& path);
// `s` with each control character shown as '?' (one line, safe in a table).
std::string printable(std::string s);
std::string hours(double seconds);  // "12.34" (h), "-" for negative

int cmd_simulate(const std::vector<std::string>& args);
int cmd_schedule(const std::vector<std::string>& args);
int cmd_trace(const std::vector<std::string>& args);
int cmd_cluster(const std::vector<std::string>& args);
int cmd_gpus(const std::vector<std::string>& args);
int cmd_db(const std::vector<std::string>& args);
int cmd_sweep(const std::vector<std::string>& args);
int cmd_profile(const std::vector<std::string>& args);
// The estimator and tuner (cli/estimate.cc, cli/validate.cc).
int cmd_estimate(const std::vector<std::string>& args);
int cmd_tune(const std::vector<std::string>& args);
int cmd_validate(const std::vector<std::string>& args);
// `validate fork`: HadarE's fork efficiency measured (cli/validate_fork.cc).
int cmd_validate_fork(const std::vector<std::string>& args);
// The online runner (cli/run.cc).
int cmd_run(const std::vector<std::string>& args);
int cmd_submit(const std::vector<std::string>& args);
int cmd_status(const std::vector<std::string>& args);
int cmd_cancel(const std::vector<std::string>& args);
// Malleable jobs on the nodes a Slurm cluster leaves idle (cli/scavenge.cc).
int cmd_scavenge(const std::vector<std::string>& args);

}  // namespace cellsched::cli
