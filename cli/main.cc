// cellsched: heterogeneity-aware scheduling of deep-learning training.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli/common.h"
#include "core/error.h"
#include "db/store.h"

namespace {

void usage(std::ostream& out) {
  out << "usage: cellsched <verb> [options]   (cellsched <verb> --help for details)\n\nverbs:\n";
  for (const auto& v : cellsched::cli::verbs()) {
    out << "  " << v.name << std::string(12 - std::strlen(v.name), ' ') << v.summary << "\n";
  }
  out << "\nexit status: 0 ok, 1 failure, 2 bad usage or bad input\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    usage(std::cout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::cout << "cellsched " << CELLSCHED_VERSION << "\n";
    return 0;
  }
  for (const auto& v : cellsched::cli::verbs()) {
    if (args[0] != v.name) continue;
    try {
      return v.run(std::vector<std::string>(args.begin() + 1, args.end()));
    } catch (const cellsched::InputError& e) {
      std::cerr << "cellsched " << v.name << ": " << e.what() << "\n";
      return 2;
    } catch (const boost::program_options::error& e) {
      std::cerr << "cellsched " << v.name << ": " << e.what() << " (see --help)\n";
      return 2;
    } catch (const cellsched::db::StoreError& e) {
      std::cerr << "cellsched " << v.name << ": database: " << e.what() << "\n";
      return 1;
    } catch (const std::exception& e) {
      std::cerr << "cellsched " << v.name << ": error: " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "cellsched: unknown verb '" << args[0] << "'\n";
  usage(std::cerr);
  return 2;
}
