// Readers of the field's published job traces: Tiresias `*_job.csv`,
// Crius/Arena traces and Pollux workloads (docs/formats.md has each format,
// its source and the mapping rules).
#include <algorithm>
#include <cmath>

#include "core/trace_read.h"

namespace cellsched::detail {

namespace {

using Row = std::vector<std::string>;

// A job type for `name` through `defaults` and the user's map: a job type of
// the table, a model of the table (then the measured batch nearest
// `per_gpu_batch`, if > 0, else the smallest), or "model@batch" (zoo).
struct TypeChoice {
  std::string job_type, model;
  int batch = 0;
  bool zoo = false;
};

// The table's job types, sorted (read once per file).
std::vector<std::string> table_types(const TraceReadOptions& options) {
  return options.table ? options.table->job_types() : std::vector<std::string>{};
}

TypeChoice choose_type(const Ctx& c, const std::string& name,
                       const std::map<std::string, std::string>& defaults,
                       const TraceReadOptions& options, const std::vector<std::string>& types,
                       double per_gpu_batch) {
  auto it = options.model_map.find(name);
  std::string target;
  if (it != options.model_map.end()) target = it->second;
  else if (auto d = defaults.find(lower(name)); d != defaults.end()) target = d->second;
  else
    c.fail("no job type for '" + name + "' (map it with --model-map '" + name +
           "=<job type or model@batch>')");
  TypeChoice ch;
  if (const auto at = target.find('@'); at != std::string::npos) {
    const auto b = to_int(target.substr(at + 1));
    if (!b || *b <= 0) c.fail("bad batch in the model map entry '" + name + "=" + target + "'");
    ch = {target, target.substr(0, at), static_cast<int>(*b), true};
    return ch;
  }
  if (!options.table) c.fail("mapping '" + name + "' onto job types needs a throughput table");
  if (std::binary_search(types.begin(), types.end(), target)) {
    auto [model, batch] = split_job_type(target);
    return {target, model, batch, false};
  }
  double best = -1;
  for (const std::string& type : types) {
    auto [model, batch] = split_job_type(type);
    if (model != target) continue;
    const double d = per_gpu_batch > 0 && batch > 0 ? std::fabs(std::log(batch / per_gpu_batch))
                                                    : batch;
    if (best < 0 || d < best) best = d, ch = {type, model, batch, false};
  }
  if (best < 0)
    c.fail("'" + name + "' maps to '" + target + "', which is neither a job type nor a model of " +
           "the throughput table");
  return ch;
}

// Iterations for `duration_s` on the reference GPU (table or zoo rate).
double iterations_for(const Ctx& c, const TypeChoice& ch, int gpus, double duration_s,
                      const TraceReadOptions& options) {
  double rate = 0;
  if (ch.zoo) {
    if (!options.model_rate) c.fail("zoo model '" + ch.model + "' needs --oracle cells");
    rate = options.model_rate(ch.model, ch.batch, gpus);
  } else {
    rate = reference_rate(*options.table, options.reference_gpu, ch.job_type, gpus);
  }
  if (!(rate > 0))
    c.fail("'" + ch.job_type + "' has no throughput at " + std::to_string(gpus) + " GPU(s) on '" +
           options.reference_gpu + "' to turn the duration into iterations");
  return std::max(1.0, std::round(duration_s * rate));
}

// Tiresias's TF-CNN benchmark names onto Gavel's job types: the ImageNet
// CNNs (ResNet, VGG, Inception) onto ResNet-50, the lighter AlexNet and
// GoogLeNet onto ResNet-18, each at batch 32 (tf_cnn_benchmarks' default).
const std::map<std::string, std::string>& tiresias_defaults() {
  static const std::map<std::string, std::string> m = {
      {"resnet50", "ResNet-50 (batch size 32)"},  {"resnet101", "ResNet-50 (batch size 32)"},
      {"resnet152", "ResNet-50 (batch size 32)"}, {"vgg11", "ResNet-50 (batch size 32)"},
      {"vgg16", "ResNet-50 (batch size 32)"},     {"vgg19", "ResNet-50 (batch size 32)"},
      {"inception3", "ResNet-50 (batch size 32)"}, {"inception4", "ResNet-50 (batch size 32)"},
      {"alexnet", "ResNet-18 (batch size 32)"},   {"googlenet", "ResNet-18 (batch size 32)"},
  };
  return m;
}

}  // namespace

void read_tiresias(const std::string& path, const std::vector<std::string_view>& lines,
                   const TraceReadOptions& options, Trace& t) {
  const auto types = table_types(options);
  FirstSeen ids("job_id");
  for_each_row(path, lines, "Tiresias",
               "job_id,num_gpu,submit_time,iterations,model_name,duration,interval",
               [&](const Ctx& c, const Row& f) {
                 Job j;
                 j.name = std::string(trim(f[0]));
                 if (j.name.empty()) c.fail("empty job_id");
                 ids.add(path, c.line, j.name);
                 j.gpus = c.positive_int(f[1], "num_gpu");
                 j.arrival_s = c.non_negative(f[2], "submit_time");
                 c.positive(f[3], "iterations");
                 const std::string model(trim(f[4]));
                 if (model.empty()) c.fail("empty model_name");
                 const double duration = c.positive(f[5], "duration");
                 c.non_negative(f[6], "interval");
                 const TypeChoice ch = choose_type(c, model, tiresias_defaults(), options, types, 0);
                 j.job_type = ch.job_type;
                 j.model = ch.model;
                 j.batch_size = ch.batch;
                 j.total_iterations = iterations_for(c, ch, j.gpus, duration, options);
                 j.duration_hint_s = duration;
                 count_note(t, "model " + model + " -> " + ch.job_type);
                 c.add(std::move(j), t);
               });
}

void read_crius(const std::string& path, const std::vector<std::string_view>& lines,
                const TraceReadOptions& /*options*/, Trace& t) {
  const size_t first = t.jobs.size();
  FirstSeen ids("job_id");
  for_each_row(
      path, lines, "Crius/Arena",
      "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type",
      [&](const Ctx& c, const Row& f) {
        Job j;
        j.name = std::string(trim(f[0]));
        if (j.name.empty()) c.fail("empty job_id");
        ids.add(path, c.line, j.name);
        j.arrival_s = c.non_negative(f[1], "submission_time");
        j.total_iterations = c.positive(f[2], "num_iteration");
        j.model = std::string(trim(f[3]));
        if (j.model.empty()) c.fail("empty model_name");
        j.job_type = j.model;
        const double deadline = c.non_negative(f[4], "deadline");
        if (deadline < j.arrival_s)
          c.fail("deadline " + std::string(trim(f[4])) + " is before the submission time " +
                 std::string(trim(f[1])));
        j.deadline_s = deadline;
        j.batch_size = c.positive_int(f[5], "batch_size");
        j.gpus = c.positive_int(f[6], "num_gpu");
        const std::string type(trim(f[7]));
        if (type.empty()) c.fail("empty gpu_type");
        count_note(t, "requested gpu_type " + type + " (not binding)");
        c.add(std::move(j), t);
      });
  rebase_arrivals(t, first);
}

namespace {

// Pollux's six applications (petuum/adaptdl simulator/applications.py @
// de25dcc9): the job type each stands for by default, and the samples a job
// trains on: iteration x batch at Pollux's completion epoch (max_epochs) in
// the application's validation-<batch>.csv.
struct PolluxApp {
  const char* model;   // Gavel model the batch is chosen within
  double samples;      // samples processed to completion
};
const std::map<std::string, PolluxApp>& pollux_apps() {
  static const std::map<std::string, PolluxApp> m = {
      {"cifar10", {"ResNet-18", 20377.0 * 256}},     // 100 epochs, validation-256.csv
      {"imagenet", {"ResNet-50", 576525.0 * 200}},   // 90 epochs, validation-200.csv
      {"ncf", {"Recommendation", 48625.0 * 1024}},   // 10 epochs, validation-1024.csv
      {"deepspeech2", {"LM", 4041.0 * 160}},         // 80 epochs, validation-160.csv
      {"bert", {"Transformer", 14774.0 * 12}},       // 2 epochs, validation-12.csv
      {"yolov3", {"ResNet-50", 103444.0 * 8}},       // 50 epochs, validation-8.csv
  };
  return m;
}

}  // namespace

// Arrival times are kept as the file gives them (seconds into the sampled
// window), as Pollux's simulator uses them.
void read_pollux(const std::string& path, const std::vector<std::string_view>& lines,
                 const TraceReadOptions& options, Trace& t) {
  std::map<std::string, std::string> defaults;
  for (const auto& [app, a] : pollux_apps()) defaults[app] = a.model;
  const auto types = table_types(options);
  FirstSeen names("name");
  for_each_row(path, lines, "Pollux", "name,time,application,num_replicas,batch_size",
               [&](const Ctx& c, const Row& f) {
                 Job j;
                 j.name = std::string(trim(f[0]));
                 if (j.name.empty()) c.fail("empty name");
                 names.add(path, c.line, j.name);
                 j.arrival_s = c.non_negative(f[1], "time");
                 const std::string app(trim(f[2]));
                 if (app.empty()) c.fail("empty application");
                 j.gpus = c.positive_int(f[3], "num_replicas");
                 const int batch = c.positive_int(f[4], "batch_size");
                 const auto known = pollux_apps().find(app);
                 if (known == pollux_apps().end())
                   c.fail("unknown application '" + app +
                          "' (Pollux's are bert, cifar10, deepspeech2, imagenet, ncf, yolov3)");
                 const TypeChoice ch = choose_type(c, app, defaults, options, types,
                                                   static_cast<double>(batch) / j.gpus);
                 j.job_type = ch.job_type;
                 j.model = ch.model;
                 j.batch_size = ch.batch;
                 j.total_iterations = std::max(1.0, std::ceil(known->second.samples / batch));
                 count_note(t, "application " + app + " -> " + ch.job_type);
                 c.add(std::move(j), t);
               });
}

// Helios (SenseTime, SC'21; S-Lab-System-Group/HeliosData `cluster_log.csv`):
// GPU jobs, arrival = submit_time from the earliest, work = `duration` (s)
// at the job type drawn as for Philly.
void read_helios(const std::string& path, const std::vector<std::string_view>& lines,
                 const TraceReadOptions& options, Trace& t) {
  TypeDraw draw(path, options);
  const size_t first = t.jobs.size();
  FirstSeen ids("job_id");
  for_each_row(
      path, lines, "Helios",
      "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue",
      [&](const Ctx& c, const Row& f) {
        Job j;
        j.name = std::string(trim(f[0]));
        if (j.name.empty()) c.fail("empty job_id");
        ids.add(path, c.line, j.name);
        const int gpus = c.non_negative_int(f[3], "gpu_num");
        c.non_negative_int(f[4], "cpu_num");
        c.non_negative_int(f[5], "node_num");
        const std::string state(trim(f[6]));
        if (state.empty()) c.fail("empty state");
        int64_t submit = 0, start = 0, end = 0;
        if (!parse_timestamp(f[7], submit))
          c.fail("bad submit_time '" + std::string(trim(f[7])) + "' (expected YYYY-MM-DD HH:MM:SS)");
        const bool ran = parse_timestamp(f[8], start) && parse_timestamp(f[9], end);
        if (ran && end < start) c.fail("end_time is before start_time");
        const double duration = c.non_negative(f[10], "duration");
        c.non_negative(f[11], "queue");
        count_note(t, "state " + state);
        if (gpus == 0) return count_note(t, "skipped: CPU job");
        if (duration == 0) return count_note(t, "skipped: zero duration");
        draw.assign(c, gpus, duration, j, t);
        j.arrival_s = static_cast<double>(submit);
        c.add(std::move(j), t);
      });
  rebase_arrivals(t, first);
}

}  // namespace cellsched::detail
