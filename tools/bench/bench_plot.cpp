// Writes the series to a temporary data file and a gnuplot script, then runs gnuplot.
#include "bench_plot.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::cli {

void write_plot(const std::string& png_path, const std::string& title,
                const std::vector<PlotSeries>& series) {
  char dir_template[] = "/tmp/tpcomm_plot_XXXXXX";
  if (mkdtemp(dir_template) == nullptr)
    throw Error(ErrorCode::kUnavailable, "--plot: cannot make a temporary folder");
  const std::filesystem::path dir(dir_template);
  std::string plots_time, plots_bw;
  for (std::size_t s = 0; s < series.size(); ++s) {
    const auto file = dir / fmt::format("series{}.tsv", s);
    std::ofstream out(file);
    for (std::size_t i = 0; i < series[s].bytes.size(); ++i) {
      out << series[s].bytes[i] << "\t" << series[s].time_us[i] << "\t" << series[s].busbw[i]
          << "\n";
    }
    plots_time += fmt::format("{}'{}' using 1:2 with linespoints title '{}'", s ? ", " : "",
                              file.string(), series[s].engine);
    plots_bw += fmt::format("{}'{}' using 1:3 with linespoints title '{}'", s ? ", " : "",
                            file.string(), series[s].engine);
  }
  const auto script = dir / "plot.gp";
  std::ofstream(script) << fmt::format(
      "set terminal pngcairo size 1200,500 font 'sans,10' noenhanced\n"
      "set output '{}'\n"
      "set multiplot layout 1,2 title '{}'\n"
      "set logscale x 2\nset format x '%.0b %BB'\nset xlabel 'message size'\nset grid\nset key top "
      "left\n"
      "set logscale y 10\nset ylabel 'latency (us)'\nplot {}\n"
      "unset logscale y\nset ylabel 'bus bandwidth (GB/s)'\nplot {}\n"
      "unset multiplot\n",
      png_path, title, plots_time, plots_bw);
  const std::string command = fmt::format("gnuplot '{}' 2>&1", script.string());
  const int rc = std::system(command.c_str());
  std::filesystem::remove_all(dir);
  if (rc != 0) {
    throw Error(
        ErrorCode::kUnavailable,
        fmt::format("--plot: gnuplot failed (exit status {}); install gnuplot-nox (apt-get install "
                    "gnuplot-nox)",
                    WIFEXITED(rc) ? WEXITSTATUS(rc) : rc));
  }
}

}  // namespace tpcomm::cli
