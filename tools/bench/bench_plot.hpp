// --plot for tpcomm bench: latency and bus bandwidth against message size, one line per engine,
// drawn by gnuplot (Debian's gnuplot-nox) into a PNG.
#pragma once

#include <string>
#include <vector>

namespace tpcomm::cli {

struct PlotSeries {
  std::string engine;
  std::vector<double> bytes, time_us, busbw;
};

// Throws kUnavailable when gnuplot is missing or fails.
void write_plot(const std::string& png_path, const std::string& title,
                const std::vector<PlotSeries>& series);

}  // namespace tpcomm::cli
