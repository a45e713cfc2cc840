// `cellsched validate fork` (HadarE's fork efficiency): bad options exit 2;
// the tiny form trains the example trainer for real and reports efficiencies.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"

namespace fs = std::filesystem;
using cellsched::testing::Result;

namespace {

class ValidateFork : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = cellsched::testing::fresh_test_dir("cellsched-validate-fork"); }
  void TearDown() override { fs::remove_all(dir_); }
  Result run(std::vector<std::string> args) {
    args.insert(args.begin(), {CELLSCHED_BINARY, "validate", "fork"});
    return cellsched::testing::run_in(args, dir_);
  }
  fs::path dir_;
};

TEST_F(ValidateFork, BadOptionsExit2) {
  for (const std::vector<std::string>& a :
       std::vector<std::vector<std::string>>{{"--copies", "1"},
                                             {"--copies", "2,x"},
                                             {"--copies", "100"},
                                             {"--seeds", "0"},
                                             {"--round-iterations", "-5"},
                                             {"--target-ratio", "nan"},
                                             {"--target-ratio", "1.5"},
                                             {"--lr", "inf"},
                                             {"--max-rounds", "0"},
                                             {"--batch", "0"},
                                             {"--label-noise", "-0.5"},
                                             {"--label-noise", "nan"}}) {
    const Result r = run(a);
    EXPECT_EQ(r.status, 2) << a[0] << " " << a[1] << ": " << r.err;
    EXPECT_FALSE(r.err.empty());
  }
}

TEST_F(ValidateFork, TinyMeasurementRunsAndReportsEfficiency) {
#ifndef CELLSCHED_TEST_TORCH
  GTEST_SKIP() << "this build has no LibTorch";
#endif
  // One seed, two copies, a loose target: a few rounds of a few processes.
  const Result r = run({"--seeds", "1", "--copies", "2", "--round-iterations", "40", "--target-ratio", "0.01",
                        "--work-dir", (dir_ / "w").string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["copies"], 1);
  EXPECT_DOUBLE_EQ(j["results"][0]["efficiency_mean"].get<double>(), 1.0);
  EXPECT_EQ(j["results"][1]["copies"], 2);
  const double its1 = j["results"][0]["iterations_to_target"][0].get<double>();
  const double its2 = j["results"][1]["iterations_to_target"][0].get<double>();
  EXPECT_GT(its1, 0);
  EXPECT_GT(its2, 0);
  // Whole rounds of 40 iterations per gang: k=1 takes 40 n, k=2 takes 80 m.
  EXPECT_EQ(static_cast<long>(its1) % 40, 0);
  EXPECT_EQ(static_cast<long>(its2) % 80, 0);
  const double eff = j["results"][1]["efficiency_mean"].get<double>();
  EXPECT_NEAR(eff, its1 / its2, 1e-12);
  EXPECT_GT(eff, 0);
  EXPECT_LE(eff, 2.0);
  // The noise model fitted on k = 2 gives k = 2 back, within what it can
  // describe (1/k: copies add nothing, 1: copies count in full).
  ASSERT_TRUE(j.contains("noise_model")) << r.out;
  EXPECT_EQ(j["noise_model"]["fitted_on_copies"], 2);
  const double e = j["noise_model"]["fork_efficiency"].get<double>();
  EXPECT_GE(e, 0);
  EXPECT_LE(e, 1);
  EXPECT_NEAR(j["results"][1]["noise_model_efficiency"].get<double>(), std::clamp(eff, 0.5, 1.0), 1e-9);
}

// The PyTorch example trainer takes the same contract (--eval, --data-seed,
// --label-noise): validate fork measures with it through --trainer, the
// copies averaged by the LibTorch averager from its torch.save checkpoints.
TEST_F(ValidateFork, PytorchTrainerMeasuresTheSameWay) {
#ifndef CELLSCHED_TEST_TORCH
  GTEST_SKIP() << "this build has no LibTorch";
#endif
  if (!fs::exists("/usr/bin/python3") || std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 with torch (python3-torch) is not installed";
  const std::string train = std::string(CELLSCHED_EXAMPLES) + "/trainers/train.py";
  const Result r = run({"--trainer", train, "--seeds", "1", "--copies", "2", "--round-iterations", "40",
                        "--target-ratio", "0.01", "--work-dir", (dir_ / "w").string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["trainer"], train);
  ASSERT_EQ(j["results"].size(), 2u);
  const double its1 = j["results"][0]["iterations_to_target"][0].get<double>();
  const double its2 = j["results"][1]["iterations_to_target"][0].get<double>();
  ASSERT_GT(its1, 0);
  ASSERT_GT(its2, 0);
  EXPECT_EQ(static_cast<long>(its2) % 80, 0);  // whole rounds of 2 gangs x 40
  EXPECT_NEAR(j["results"][1]["efficiency_mean"].get<double>(), its1 / its2, 1e-12);
  // The Python trainer refuses a bad regime with exit 2, as the LibTorch one does.
  for (const std::vector<std::string>& a : std::vector<std::vector<std::string>>{
           {"--batch", "0"}, {"--label-noise", "nan"}, {"--lr", "nan"}, {"--step-sleep", "-1"},
           {"--save-every", "inf"}, {"--data-seed", "-3"}, {"--hidden", "0"}}) {
    std::vector<std::string> args{"/usr/bin/python3", train, "--eval"};
    args.insert(args.end(), a.begin(), a.end());
    const Result bad = cellsched::testing::run_in(args, dir_);
    EXPECT_EQ(bad.status, 2) << a[0] << " " << a[1] << ": " << bad.err;
  }
}

// The regime flags reach the trainer: a noisy, small-batch measurement runs
// (one seed, a target one round of 100 iterations reaches: a few processes)
// and says which regime it measured.
TEST_F(ValidateFork, NoisyRegimeFlagsReachTheTrainer) {
#ifndef CELLSCHED_TEST_TORCH
  GTEST_SKIP() << "this build has no LibTorch";
#endif
  const Result r = run({"--seeds", "1", "--copies", "2", "--round-iterations", "100", "--target-ratio", "0.2",
                        "--batch", "4", "--label-noise", "0.5", "--lr", "0.01", "--max-rounds", "5",
                        "--work-dir", (dir_ / "w").string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["batch"], 4);
  EXPECT_DOUBLE_EQ(j["label_noise"].get<double>(), 0.5);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_GT(j["results"][0]["iterations_to_target"][0].get<double>(), 0);
  EXPECT_EQ(static_cast<long>(j["results"][0]["iterations_to_target"][0].get<double>()) % 100, 0);
}

// The trainer (beside cellsched, where validate fork finds it) refuses a bad
// or out-of-range value of any option with exit 2, naming the option.
TEST_F(ValidateFork, TrainerRefusesABadRegime) {
#ifndef CELLSCHED_TEST_TORCH
  GTEST_SKIP() << "this build has no LibTorch";
#else
  const std::string trainer = (fs::path(CELLSCHED_BINARY).parent_path() / "cellsched_example_trainer").string();
  for (const std::vector<std::string>& a : std::vector<std::vector<std::string>>{
           {"--batch", "0"}, {"--label-noise", "-1"}, {"--label-noise", "nan"}, {"--lr", "abc"},
           {"--lr", "0"}, {"--lr", "inf"}, {"--step-sleep", "-1"}, {"--save-every", "1e308"},
           {"--data-seed", "-3"}, {"--data-seed", "7x"}}) {
    std::vector<std::string> args{trainer, "--eval"};
    args.insert(args.end(), a.begin(), a.end());
    const Result r = cellsched::testing::run_in(args, dir_);
    EXPECT_EQ(r.status, 2) << a[0] << " " << a[1] << ": " << r.err;
    EXPECT_NE(r.err.find(a[0]), std::string::npos) << r.err;
  }
#endif
}

}  // namespace
