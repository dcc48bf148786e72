#include "glassbox/export/onnx.h"

#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <set>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::exporter {

namespace {

std::string join(const std::string& path, const std::string& child) {
  return path.empty() ? child : path + "." + child;
}

class Emitter {
 public:
  Emitter(const ExportGraph& graph, const torch::nn::Module& module, onnx::GraphProto& g) : graph_(graph), g_(g) {
    for (const auto& p : module.named_parameters()) tensors_[p.key()] = p.value();
    for (const auto& b : module.named_buffers()) tensors_[b.key()] = b.value();
  }

  void set_rank(const std::string& value, std::int64_t rank) { rank_[value] = rank; }
  // Graph input and output names no layer may take.
  void reserve(const std::string& name) { used_.insert(name); }

  // Emits the module at `path` applied to the value `x`; returns its output value.
  std::string module(const std::string& path, const std::string& x) {
    const ModuleGraph& m = graph_.modules.at(path);
    std::vector<std::string> values(static_cast<std::size_t>(m.num_values));
    values[0] = x;
    std::size_t primitive = 0;
    for (const Node& n : m.nodes) primitive += n.kind != OpKind::kCall;
    for (const Node& n : m.nodes) {
      std::vector<std::string> in;
      for (int v : n.inputs) in.push_back(values.at(static_cast<std::size_t>(v)));
      if (n.kind == OpKind::kCall) {
        values[static_cast<std::size_t>(n.output)] = module(join(path, n.child), in[0]);
        continue;
      }
      // A layer that is one op names its output after the layer; a function inside a block
      // (the ReLU after a residual add) after the block and the op.
      const std::string base = primitive == 1 && !path.empty() ? path : join(path, op_name(n.kind));
      where_ = path.empty() ? std::string("the model") : "layer " + path;
      values[static_cast<std::size_t>(n.output)] = op(n, path, in, unique(base));
    }
    return values[static_cast<std::size_t>(m.output)];
  }

 private:
  std::string unique(const std::string& base) {
    std::string name = base;
    for (int i = 1; used_.contains(name); ++i) name = base + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }

  std::int64_t rank(const std::string& v) const {
    auto it = rank_.find(v);
    GB_CHECK(it != rank_.end(), Internal, "ONNX export lost the rank of " << v, "report this as a glassbox bug");
    return it->second;
  }

  onnx::NodeProto* node(const std::string& type, const std::vector<std::string>& in, const std::string& out,
                        const std::string& name) {
    onnx::NodeProto* n = g_.add_node();
    n->set_op_type(type);
    n->set_name(name);
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
    if (!in.empty() && rank_.contains(in[0])) rank_[out] = rank_[in[0]];
    return n;
  }

  static void attr(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, const std::vector<std::int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }

  // An initializer holding `t` (as float32, or int64 for integer tensors) under `name`.
  std::string initializer(const std::string& name, const at::Tensor& t) {
    if (initialized_.contains(name)) return name;
    initialized_.insert(name);
    used_.insert(name);
    onnx::TensorProto* p = g_.add_initializer();
    p->set_name(name);
    const bool integer = !at::isFloatingType(t.scalar_type());
    at::Tensor c = t.detach().to(torch::kCPU).to(integer ? torch::kInt64 : torch::kFloat32).contiguous();
    p->set_data_type(integer ? onnx::TensorProto::INT64 : onnx::TensorProto::FLOAT);
    for (auto d : c.sizes()) p->add_dims(d);
    p->set_raw_data(std::string(static_cast<const char*>(c.data_ptr()), static_cast<std::size_t>(c.nbytes())));
    return name;
  }
  std::string param(const std::string& path, const std::string& name) {
    const std::string full = join(path, name);
    auto it = tensors_.find(full);
    GB_CHECK(it != tensors_.end(), Internal, "ONNX export: no tensor " << full, "report this as a glassbox bug");
    return initializer(full, it->second);
  }
  // A scalar constant, named after its exact bits (two constants equal to 6 digits stay apart).
  std::string scalar(float v) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    return initializer(fmt::format("const_{}_{:08x}", v, bits), torch::tensor({v}).reshape({}));
  }
  std::string int64s(const std::string& name, const std::vector<std::int64_t>& v) {
    return initializer(name, torch::tensor(v, torch::kInt64));
  }

  std::string op(const Node& n, const std::string& path, const std::vector<std::string>& in, const std::string& out) {
    const std::string& x = in[0];
    switch (n.kind) {
      case OpKind::kCall: break;
      case OpKind::kLinear: {
        const std::string w = param(path, n.weight);
        if (rank(x) == 2) {
          std::vector<std::string> args{x, w};
          if (!n.bias.empty()) args.push_back(param(path, n.bias));
          auto* g = node("Gemm", args, out, out);
          attr(g, "transB", std::int64_t{1});
          return out;
        }
        const std::string wt = unique(out + "/weight_t");
        attr(node("Transpose", {w}, wt, wt), "perm", std::vector<std::int64_t>{1, 0});
        if (n.bias.empty()) {
          node("MatMul", {x, wt}, out, out);
          rank_[out] = rank(x);
          return out;
        }
        const std::string mm = unique(out + "/matmul");
        node("MatMul", {x, wt}, mm, mm);
        rank_[mm] = rank(x);
        node("Add", {mm, param(path, n.bias)}, out, out);
        return out;
      }
      case OpKind::kConv2d: {
        std::vector<std::string> args{x, param(path, n.weight)};
        if (!n.bias.empty()) args.push_back(param(path, n.bias));
        auto* c = node("Conv", args, out, out);
        attr(c, "kernel_shape", n.kernel);
        attr(c, "strides", n.stride);
        attr(c, "pads", std::vector<std::int64_t>{n.padding[0], n.padding[1], n.padding[0], n.padding[1]});
        attr(c, "dilations", n.dilation);
        attr(c, "group", n.groups);
        return out;
      }
      case OpKind::kBatchNorm: {
        const at::Tensor& mean = tensors_.at(join(path, n.running_mean));
        const std::string scale =
            n.weight.empty() ? initializer(join(path, "weight(ones)"), torch::ones_like(mean)) : param(path, n.weight);
        const std::string bias =
            n.bias.empty() ? initializer(join(path, "bias(zeros)"), torch::zeros_like(mean)) : param(path, n.bias);
        auto* b = node("BatchNormalization", {x, scale, bias, param(path, n.running_mean), param(path, n.running_var)},
                       out, out);
        attr(b, "epsilon", static_cast<float>(n.eps));
        return out;
      }
      case OpKind::kLayerNorm: {
        const std::string scale =
            n.weight.empty() ? initializer(join(path, "weight(ones)"), torch::ones(n.shape)) : param(path, n.weight);
        const std::string bias =
            n.bias.empty() ? initializer(join(path, "bias(zeros)"), torch::zeros(n.shape)) : param(path, n.bias);
        auto* l = node("LayerNormalization", {x, scale, bias}, out, out);
        attr(l, "axis", -static_cast<std::int64_t>(n.shape.size()));
        attr(l, "epsilon", static_cast<float>(n.eps));
        return out;
      }
      case OpKind::kGroupNorm: {
        // InstanceNormalization over [N, G, rest] is GroupNorm without its per-channel affine.
        const std::string grouped = unique(out + "/grouped");
        node("Reshape", {x, int64s(join(path, "group_shape"), {0, n.groups, -1})}, grouped, grouped);
        const std::string normed = unique(out + "/normalised");
        auto* in_norm = node("InstanceNormalization",
                             {grouped, initializer(join(path, "group_scale"), torch::ones({n.groups})),
                              initializer(join(path, "group_bias"), torch::zeros({n.groups}))},
                             normed, normed);
        attr(in_norm, "epsilon", static_cast<float>(n.eps));
        const std::string shape = unique(out + "/shape");
        node("Shape", {x}, shape, shape);
        const std::string back = n.weight.empty() ? out : unique(out + "/ungrouped");
        node("Reshape", {normed, shape}, back, back);
        rank_[back] = rank(x);
        if (n.weight.empty()) return out;
        std::vector<std::int64_t> affine_shape{-1};
        for (std::int64_t i = 2; i < rank(x); ++i) affine_shape.push_back(1);
        // The parameters keep their names and shapes [C]; a Reshape makes them broadcast.
        const std::string affine = int64s(join(path, "affine_shape"), affine_shape);
        const std::string w = unique(out + "/weight");
        node("Reshape", {param(path, n.weight), affine}, w, w);
        const std::string b = unique(out + "/bias");
        node("Reshape", {param(path, n.bias), affine}, b, b);
        const std::string scaled = unique(out + "/scaled");
        node("Mul", {back, w}, scaled, scaled);
        node("Add", {scaled, b}, out, out);
        return out;
      }
      case OpKind::kRelu: node("Relu", {x}, out, out); return out;
      case OpKind::kTanh: node("Tanh", {x}, out, out); return out;
      case OpKind::kSigmoid: node("Sigmoid", {x}, out, out); return out;
      case OpKind::kSilu: {
        const std::string s = unique(out + "/sigmoid");
        node("Sigmoid", {x}, s, s);
        node("Mul", {x, s}, out, out);
        return out;
      }
      case OpKind::kGelu: {
        // none: 0.5 x (1 + erf(x / sqrt 2)); tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        std::string inner;
        if (n.approximate == "tanh") {
          const std::string cube = unique(out + "/cube");
          node("Pow", {x, scalar(3.0f)}, cube, cube);
          const std::string scaled = unique(out + "/cube_scaled");
          node("Mul", {cube, scalar(0.044715f)}, scaled, scaled);
          const std::string sum = unique(out + "/sum");
          node("Add", {x, scaled}, sum, sum);
          const std::string arg = unique(out + "/tanh_arg");
          node("Mul", {sum, scalar(static_cast<float>(std::sqrt(2.0 / std::numbers::pi)))}, arg, arg);
          inner = unique(out + "/tanh");
          node("Tanh", {arg}, inner, inner);
        } else {
          const std::string arg = unique(out + "/erf_arg");
          node("Div", {x, scalar(static_cast<float>(std::sqrt(2.0)))}, arg, arg);
          inner = unique(out + "/erf");
          node("Erf", {arg}, inner, inner);
        }
        const std::string one_plus = unique(out + "/one_plus");
        node("Add", {inner, scalar(1.0f)}, one_plus, one_plus);
        const std::string times_x = unique(out + "/times_x");
        node("Mul", {x, one_plus}, times_x, times_x);
        node("Mul", {times_x, scalar(0.5f)}, out, out);
        return out;
      }
      case OpKind::kLeakyRelu: attr(node("LeakyRelu", {x}, out, out), "alpha", static_cast<float>(n.alpha)); return out;
      case OpKind::kElu: attr(node("Elu", {x}, out, out), "alpha", static_cast<float>(n.alpha)); return out;
      case OpKind::kMaxPool2d:
      case OpKind::kAvgPool2d: {
        auto* p = node(n.kind == OpKind::kMaxPool2d ? "MaxPool" : "AveragePool", {x}, out, out);
        attr(p, "kernel_shape", n.kernel);
        attr(p, "strides", n.stride);
        attr(p, "pads", std::vector<std::int64_t>{n.padding[0], n.padding[1], n.padding[0], n.padding[1]});
        attr(p, "ceil_mode", std::int64_t{n.ceil_mode});
        if (n.kind == OpKind::kMaxPool2d) {
          attr(p, "dilations", n.dilation);
        } else {
          attr(p, "count_include_pad", std::int64_t{n.count_include_pad});
        }
        return out;
      }
      case OpKind::kAdaptiveAvgPool2d:
        GB_CHECK(n.shape == std::vector<std::int64_t>({1, 1}), InvalidArgument,
                 "cannot export " << where_ << " to ONNX: adaptive average pooling to " << n.shape[0] << "x"
                                  << n.shape[1]
                                  << " has no ONNX operator for an input of any size (only 1x1, GlobalAveragePool)",
                 "pool to 1x1, or use a fixed AvgPool2d");
        node("GlobalAveragePool", {x}, out, out);
        return out;
      case OpKind::kFlatten: {
        const std::int64_t r = rank(x);
        const std::int64_t start = n.dim < 0 ? n.dim + r : n.dim;
        const std::int64_t end = n.end_dim < 0 ? n.end_dim + r : n.end_dim;
        GB_CHECK(end == r - 1 && start >= 0 && start < r, InvalidArgument,
                 "cannot export " << where_ << " to ONNX: flatten of dims " << n.dim << ".." << n.end_dim
                                  << " of a rank-" << r
                                  << " tensor (only flattening through the last dim is supported)",
                 "flatten from a dim through the last one");
        if (start == 1) {
          attr(node("Flatten", {x}, out, out), "axis", std::int64_t{1});
        } else {
          std::vector<std::int64_t> shape(static_cast<std::size_t>(start), 0);
          shape.push_back(-1);
          node("Reshape", {x, int64s(unique(out + "/shape"), shape)}, out, out);
        }
        rank_[out] = start + 1;
        return out;
      }
      case OpKind::kAdd: node("Add", {x, in.at(1)}, out, out); return out;
      case OpKind::kSoftmax: attr(node("Softmax", {x}, out, out), "axis", n.dim); return out;
      case OpKind::kLogSoftmax: attr(node("LogSoftmax", {x}, out, out), "axis", n.dim); return out;
      case OpKind::kHardswish: node("HardSwish", {x}, out, out); return out;
      case OpKind::kHardsigmoid: {
        auto* h = node("HardSigmoid", {x}, out, out);
        attr(h, "alpha", 1.0f / 6.0f);
        attr(h, "beta", 0.5f);
        return out;
      }
      case OpKind::kMul: {
        node("Mul", {x, in.at(1)}, out, out);
        rank_[out] = std::max(rank(x), rank(in.at(1)));
        return out;
      }
      case OpKind::kAddParameter: node("Add", {x, param(path, n.weight)}, out, out); return out;
      case OpKind::kTokens: return tokens(n, path, x, out);
      case OpKind::kSelectFirst: {
        node("Gather", {x, initializer("const_index_0", torch::tensor(std::int64_t{0}).reshape({}))}, out, out);
        attr(g_.mutable_node(g_.node_size() - 1), "axis", std::int64_t{1});
        rank_[out] = rank(x) - 1;
        return out;
      }
      case OpKind::kSelfAttention: return self_attention(n, path, x, out);
    }
    GB_THROW(Internal, "ONNX export: unhandled op " << op_name(n.kind), "report this as a glassbox bug");
  }

  // [N, E, h, w] -> [N, 1 + h*w, E] with the class token first.
  std::string tokens(const Node& n, const std::string& path, const std::string& x, const std::string& out) {
    const std::string flat = unique(out + "/flatten");
    node("Reshape", {x, int64s("const_shape_0_0_-1", {0, 0, -1})}, flat, flat);
    const std::string seq = unique(out + "/sequence");
    attr(node("Transpose", {flat}, seq, seq), "perm", std::vector<std::int64_t>{0, 2, 1});
    // The class token expanded to [N, 1, E]: N read off the input's shape.
    const std::string shape = unique(out + "/shape");
    node("Shape", {x}, shape, shape);
    const std::string batch = unique(out + "/batch");
    node("Slice", {shape, int64s("const_0", {0}), int64s("const_1", {1})}, batch, batch);
    const at::Tensor& token = tensors_.at(join(path, n.weight));
    const std::string rest = int64s(unique(out + "/token_dims"), {1, token.size(2)});
    const std::string target = unique(out + "/token_shape");
    attr(node("Concat", {batch, rest}, target, target), "axis", std::int64_t{0});
    const std::string expanded = unique(out + "/class_token");
    node("Expand", {param(path, n.weight), target}, expanded, expanded);
    attr(node("Concat", {expanded, seq}, out, out), "axis", std::int64_t{1});
    rank_[out] = 3;
    return out;
  }

  // Multi-head self-attention without the output projection: [N, L, E] -> [N, L, E].
  std::string self_attention(const Node& n, const std::string& path, const std::string& x, const std::string& out) {
    const at::Tensor& w = tensors_.at(join(path, n.weight));
    const std::int64_t e = w.size(1), h = n.groups, d = e / h;
    const std::string wt = unique(out + "/in_proj_t");
    attr(node("Transpose", {param(path, n.weight)}, wt, wt), "perm", std::vector<std::int64_t>{1, 0});
    const std::string mm = unique(out + "/in_proj");
    node("MatMul", {x, wt}, mm, mm);
    const std::string qkv = unique(out + "/qkv");
    node("Add", {mm, param(path, n.bias)}, qkv, qkv);
    const std::string q = unique(out + "/q"), k = unique(out + "/k"), v = unique(out + "/v");
    auto* split = g_.add_node();
    split->set_op_type("Split");
    split->set_name(unique(out + "/split"));
    split->add_input(qkv);
    split->add_input(int64s(unique(out + "/split_sizes"), {e, e, e}));
    for (const auto& o : {q, k, v}) split->add_output(o);
    attr(split, "axis", std::int64_t{-1});
    const std::string head_shape = int64s(unique(out + "/head_shape"), {0, 0, h, d});
    auto heads = [&](const std::string& t, std::vector<std::int64_t> perm) {
      const std::string r = unique(t + "/heads");
      node("Reshape", {t, head_shape}, r, r);
      const std::string p = unique(t + "/transposed");
      attr(node("Transpose", {r}, p, p), "perm", perm);
      return p;
    };
    const std::string qh = heads(q, {0, 2, 1, 3}), kt = heads(k, {0, 2, 3, 1}), vh = heads(v, {0, 2, 1, 3});
    const std::string scores = unique(out + "/scores");
    node("MatMul", {qh, kt}, scores, scores);
    const std::string scaled = unique(out + "/scaled");
    node("Mul", {scores, scalar(static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))))}, scaled, scaled);
    const std::string weights = unique(out + "/weights");
    attr(node("Softmax", {scaled}, weights, weights), "axis", std::int64_t{-1});
    const std::string mixed = unique(out + "/mixed");
    node("MatMul", {weights, vh}, mixed, mixed);
    const std::string back = unique(out + "/merged");
    attr(node("Transpose", {mixed}, back, back), "perm", std::vector<std::int64_t>{0, 2, 1, 3});
    node("Reshape", {back, int64s(unique(out + "/shape"), {0, 0, e})}, out, out);
    rank_[out] = 3;
    return out;
  }

  const ExportGraph& graph_;
  onnx::GraphProto& g_;
  std::map<std::string, at::Tensor> tensors_;
  std::set<std::string> initialized_;
  std::set<std::string> used_;
  std::map<std::string, std::int64_t> rank_;
  std::string where_;
};

void value_info(onnx::ValueInfoProto* v, const std::string& name, const std::vector<std::int64_t>& sample_shape) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* s = t->mutable_shape();
  s->add_dim()->set_dim_param("batch");
  for (auto d : sample_shape) s->add_dim()->set_dim_value(d);
}

}  // namespace

std::string to_onnx(const ExportGraph& graph, const torch::nn::Module& module, const OnnxOptions& options) {
  GB_CHECK(!options.input_shape.empty(), InvalidArgument, "ONNX export needs the input's sample shape",
           "give e.g. [1, 28, 28]");
  onnx::ModelProto model;
  model.set_ir_version(8);  // ONNX 1.12's IR version, read by every runtime that has opset 17
  model.set_producer_name("glassbox");
  model.set_producer_version(options.producer_version);
  model.set_doc_string("exported by glassbox from its " + graph.name + " model");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name(graph.name);

  Emitter e(graph, module, *g);
  GB_CHECK(!options.input_name.empty() && !options.output_name.empty() && options.input_name != options.output_name,
           InvalidArgument,
           "ONNX input and output names must be distinct and non-empty, got \"" << options.input_name << "\" and \""
                                                                                << options.output_name << "\"",
           "name them e.g. input and logits in the contract");
  e.reserve(options.input_name);
  e.reserve(options.output_name);
  e.set_rank(options.input_name, static_cast<std::int64_t>(options.input_shape.size()) + 1);
  const std::string last = e.module("", options.input_name);
  // Name the result after the output: rename the value the last node produced, or pass the
  // input through when the model is the identity.
  bool renamed = false;
  for (int i = g->node_size() - 1; i >= 0 && !renamed; --i) {
    auto* n = g->mutable_node(i);
    for (int o = 0; o < n->output_size(); ++o) {
      if (n->output(o) == last && last != options.input_name) {
        n->set_output(o, options.output_name);
        renamed = true;
      }
    }
  }
  // A user lowering may read the last value again (e.g. return x + f(x) with f last).
  for (int i = 0; renamed && i < g->node_size(); ++i) {
    auto* n = g->mutable_node(i);
    for (int k = 0; k < n->input_size(); ++k)
      if (n->input(k) == last) n->set_input(k, options.output_name);
  }
  if (!renamed) {
    auto* n = g->add_node();
    n->set_op_type("Identity");
    n->set_name(options.output_name);
    n->add_input(last);
    n->add_output(options.output_name);
  }
  value_info(g->add_input(), options.input_name, options.input_shape);
  if (!options.output_shape.empty()) {
    value_info(g->add_output(), options.output_name, options.output_shape);
  } else {
    auto* out = g->add_output();
    out->set_name(options.output_name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  return model.SerializeAsString();
}

}  // namespace glassbox::exporter
