// A small helper for writing torchvision-style models: appends layers to a chain under a module
// prefix, numbering them as nn.Sequential does ("features.0", "features.1", ...).
#pragma once
#include <memory>
#include <string>

#include "runtime/nn/graph.h"

namespace dlb {

class Chain {
 public:
  Chain(Graph& g, int from) : g_(g), last_(from) {}
  // Adds `layer` named `name`, fed by the current end of the chain.
  int then(const std::string& name, std::unique_ptr<Layer> layer) {
    last_ = g_.add(name, std::move(layer), {last_});
    return last_;
  }
  // Adds `layer` as "<prefix>.<index>", the next nn.Sequential index.
  int seq(const std::string& prefix, std::unique_ptr<Layer> layer) {
    return then(prefix + "." + std::to_string(index_++), std::move(layer));
  }
  void restart_numbering() { index_ = 0; }
  int last() const { return last_; }
  void set_last(int node) { last_ = node; }

 private:
  Graph& g_;
  int last_;
  int index_ = 0;
};

}  // namespace dlb
