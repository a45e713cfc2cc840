// A small LibTorch training job that speaks cellsched's runner contract (the
// C++ twin of train.py): a two-layer MLP on synthetic regression data,
// resuming from CELLSCHED_CKPT_IN, writing state_dict checkpoints to
// CELLSCHED_CKPT_OUT with torch::pickle_save (the format torch.save writes
// and torch.load reads), appending `iterations=N` to CELLSCHED_PROGRESS after
// each, and stopping cleanly on SIGTERM. Usage: cellsched_example_trainer
// [--step-sleep SECONDS] [--save-every SECONDS] [--lr LR] [--data-seed N]
// [--batch N] [--label-noise S] [--eval]. --data-seed fixes the training
// batches (default: from the clock); --batch is the samples per step (default
// 64) and --label-noise the standard deviation of the Gaussian noise on the
// training labels (default 0.01); a bad or out-of-range value of any option
// exits 2. --eval trains nothing: it
// prints `loss=L`, the mean squared error of the CELLSCHED_CKPT_IN weights (or
// the initial ones) on a fixed held-out set of 4,096 samples whose labels
// carry noise 0.01 whatever --label-noise is (a floor of 1e-4, so the loss
// measures the distance to the true function; `cellsched validate fork` uses
// it).
#include <signal.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <thread>

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

std::string env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Whole-string numbers; false on anything else (empty, trailing text, range).
bool parse_long(const char* s, long& v) {
  char* end = nullptr;
  errno = 0;
  v = std::strtol(s, &end, 10);
  return *s && end && *end == 0 && errno == 0;
}
bool parse_double(const char* s, double& v) {
  char* end = nullptr;
  errno = 0;
  v = std::strtod(s, &end);
  return *s && end && *end == 0 && errno == 0;
}

struct Options {
  double step_sleep = 0, save_every = 1.0, lr = 0.05, label_noise = 0.01;
  long data_seed = -1, batch = 64;
  bool eval = false;
};

// The command line; false (after saying why on stderr) on anything bad.
bool parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--eval") {
      o.eval = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << "option " << a << " needs a value\n";
      return false;
    }
    const char* v = argv[i + 1];
    // A number in [lo, hi] (finite), or a message naming the option.
    auto number = [&](double& out, double lo, double hi, const char* what) {
      if (parse_double(v, out) && std::isfinite(out) && out >= lo && out <= hi) return true;
      std::cerr << a << ": '" << v << "' is not " << what << "\n";
      return false;
    };
    bool ok = true;
    if (a == "--data-seed") {
      ok = parse_long(v, o.data_seed) && o.data_seed >= -1;  // -1: from the clock (the default)
      if (!ok) std::cerr << "--data-seed: '" << v << "' is not a seed (an integer >= 0, or -1 for the clock)\n";
    } else if (a == "--batch") {
      ok = parse_long(v, o.batch) && o.batch >= 1 && o.batch <= 1000000;
      if (!ok) std::cerr << "--batch: '" << v << "' is not a batch size in 1..1000000\n";
    } else if (a == "--step-sleep") {
      ok = number(o.step_sleep, 0, 3600, "a number of seconds in [0, 3600]");
    } else if (a == "--save-every") {
      ok = number(o.save_every, 0, 1e9, "a number of seconds in [0, 1e9]");  // 1e9: only at the end
    } else if (a == "--lr") {
      ok = number(o.lr, 1e-12, 1000, "a learning rate in (0, 1000]");
    } else if (a == "--label-noise") {
      ok = number(o.label_noise, 0, 1000, "a standard deviation in [0, 1000]");
    } else {
      std::cerr << "unknown option " << a << "\n";
      ok = false;
    }
    if (!ok) return false;
  }
  return true;
}

// The weights of the checkpoint at `path` (a state_dict pickle) into `model`.
void load_checkpoint(const std::string& path, torch::nn::Sequential& model) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto dict = torch::pickle_load(bytes).toGenericDict();
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) p.value().copy_(dict.at(p.key()).toTensor());
}

// The contract's commit order: the whole checkpoint under OUT.N.tmp, the
// progress line (the commit), then the rename, which the runner finishes
// itself if this process dies between the two. False when the checkpoint
// could not be written (then nothing is committed).
bool commit_checkpoint(torch::nn::Sequential& model, long n, const std::string& out, const std::string& progress) {
  c10::Dict<std::string, torch::Tensor> state;
  for (auto& p : model->named_parameters()) state.insert(p.key(), p.value().detach().clone());
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(state));
  const std::string tmp = out + "." + std::to_string(n) + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) return false;
  }
  std::ofstream(progress, std::ios::app) << "iterations=" << n << "\n";
  std::rename(tmp.c_str(), out.c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_options(argc, argv, o)) return 2;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  torch::set_num_threads(1);

  const long job = std::atol(env("CELLSCHED_JOB_ID", "0").c_str());
  const long copy = std::atol(env("CELLSCHED_COPY", "0").c_str());
  const long rank = std::atol(env("RANK", "0").c_str());
  const long target = std::atol(env("CELLSCHED_ITERATIONS", "100").c_str());
  const std::string in = env("CELLSCHED_CKPT_IN", "");
  const std::string out = env("CELLSCHED_CKPT_OUT", "checkpoint.pt");
  const std::string progress = env("CELLSCHED_PROGRESS", "progress.txt");

  torch::manual_seed(1234 + job);
  const int inputs = 32, hidden = 64;
  const torch::Tensor w_true = torch::randn({inputs, 1});
  torch::nn::Sequential model(torch::nn::Linear(inputs, hidden), torch::nn::ReLU(),
                              torch::nn::Linear(hidden, 1));
  if (!in.empty() && std::ifstream(in)) load_checkpoint(in, model);
  if (o.eval) {
    torch::manual_seed(424242 + job);
    torch::NoGradGuard no_grad;
    const torch::Tensor x = torch::randn({4096, inputs});
    const torch::Tensor y = x.matmul(w_true) + 0.01 * torch::randn({4096, 1});
    std::cout << "loss=" << torch::mse_loss(model->forward(x), y).item<double>() << std::endl;
    return 0;
  }
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(o.lr));
  torch::manual_seed(o.data_seed >= 0 ? o.data_seed
                                      : job * 1000003 + copy * 7919 + static_cast<long>(now_s() * 1000) % 100003);

  long n = 0, saved = 0;
  auto save = [&] {
    if (rank != 0 || n == saved) return;
    if (commit_checkpoint(model, n, out, progress)) saved = n;
  };
  double last = now_s();
  float loss_value = 0;
  while (!g_stop && n < target) {
    const torch::Tensor x = torch::randn({o.batch, inputs});
    const torch::Tensor y = x.matmul(w_true) + o.label_noise * torch::randn({o.batch, 1});
    const torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_value = loss.item<float>();
    ++n;
    if (o.step_sleep > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.step_sleep));
    if (now_s() - last >= o.save_every) {
      save();
      last = now_s();
    }
  }
  save();
  std::cerr << "job " << job << " copy " << copy << ": " << n << " iterations, loss " << loss_value << "\n";
  return 0;
}
