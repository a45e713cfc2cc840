// Finding and starting cellsched-torch, the executable with the verbs that
// need LibTorch or the CUDA libraries, so that `cellsched` itself loads none.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli/common.h"
#include "core/self_exe.h"

namespace cellsched::cli {

std::string torch_helper_path() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("CELLSCHED_TORCH"); env && *env) return ::access(env, X_OK) == 0 ? env : "";
  const std::string self = self_executable();
  if (self.empty()) return "";
  const fs::path helper = fs::path(self).parent_path() / "cellsched-torch";
  return ::access(helper.c_str(), X_OK) == 0 ? helper.string() : "";
}

int exec_torch_helper(const std::string& verb, const std::vector<std::string>& args) {
  const std::string helper = torch_helper_path();
  const char* env = std::getenv("CELLSCHED_TORCH");
  if (helper.empty() && env && *env) {
    std::cerr << "cellsched " << verb << ": CELLSCHED_TORCH names " << env
              << ", which is not an executable file; point it at cellsched-torch (built beside cellsched by "
                 "scripts/setup) or unset it\n";
    return 1;
  }
  if (helper.empty()) {
    std::cerr << "cellsched " << verb
              << ": this needs cellsched-torch (the LibTorch, CUDA, CUPTI, NCCL and Gloo backends), which is not "
                 "installed beside this cellsched; build it (scripts/setup) or point CELLSCHED_TORCH at it\n";
    return 1;
  }
  std::vector<std::string> argv{helper, verb};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::cout.flush();
  ::execv(helper.c_str(), cargv.data());
  std::cerr << "cellsched " << verb << ": cannot start " << helper << "\n";
  return 1;
}

}  // namespace cellsched::cli
