// oneDNN Graph API driver for the dq peer benchmark.
//
// Runs ONE dequantization case: builds a graph with a single Dequantize (static)
// or DynamicDequantize op, compiles its partition, executes it on the input files,
// writes the output file, then times repeated executes and prints one JSON line:
//   {"status":"ok","median_s":...,"reps":...,"compile_s":...}
// If oneDNN rejects the case it prints "unsupported: <reason>" and exits with 3.
//
// Usage (all values after the flag):
//   onednn_driver --op dequantize|dynamic --src-type s8|u8|s4|u4 --dst-type f32|f16|bf16
//     --shape 4096x4096 [--qtype per_tensor|per_channel|per_group] [--axis N]
//     [--group-shape 1x128] --input FILE --scales FILE [--zps FILE --zps-type T]
//     [--scales-shape 4096x32] --output FILE [--threads N] [--min-reps 10]
//     [--min-time 1.0] [--max-time 3.0]
// Files are raw little-endian. For --op dequantize, the scales file holds f32 and the
// zps file s64 (they become the op's `scales`/`zps` attributes). For --op dynamic the
// scales file holds the dst dtype and the zps file --zps-type (4-bit: 2 per byte,
// element 2k in the low nibble).

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl_graph.hpp>
#include <tbb/global_control.h>

using namespace dnnl::graph;
using lt = logical_tensor;
using dims = std::vector<int64_t>;

namespace {

struct Args {
    std::map<std::string, std::string> kv;
    std::string get(const std::string &k, const std::string &def = "") const {
        auto it = kv.find(k);
        return it == kv.end() ? def : it->second;
    }
    bool has(const std::string &k) const { return kv.count(k) != 0; }
};

Args parse_args(int argc, char **argv) {
    Args a;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i];
        if (k.rfind("--", 0) != 0) throw std::runtime_error("bad flag: " + k);
        a.kv[k.substr(2)] = argv[i + 1];
    }
    return a;
}

dims parse_dims(const std::string &s) {  // "4096x32" -> {4096, 32}
    dims d;
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, 'x')) d.push_back(std::stoll(part));
    return d;
}

lt::data_type parse_dtype(const std::string &s) {
    static const std::map<std::string, lt::data_type> m = {
            {"s8", lt::data_type::s8}, {"u8", lt::data_type::u8},
            {"s4", lt::data_type::s4}, {"u4", lt::data_type::u4},
            {"s32", lt::data_type::s32}, {"f32", lt::data_type::f32},
            {"f16", lt::data_type::f16}, {"bf16", lt::data_type::bf16}};
    auto it = m.find(s);
    if (it == m.end()) throw std::runtime_error("unknown dtype " + s);
    return it->second;
}

// Bytes needed for n elements of a dtype name (4-bit types are packed 2 per byte).
size_t nbytes(const std::string &dt, int64_t n) {
    if (dt == "s4" || dt == "u4") return (size_t)(n + 1) / 2;
    if (dt == "s8" || dt == "u8") return (size_t)n;
    if (dt == "f16" || dt == "bf16") return 2 * (size_t)n;
    if (dt == "s32" || dt == "f32") return 4 * (size_t)n;
    if (dt == "s64") return 8 * (size_t)n;
    throw std::runtime_error("unknown dtype " + dt);
}

int64_t numel(const dims &d) {
    int64_t n = 1;
    for (auto x : d) n *= x;
    return n;
}

dims row_major_strides(const dims &d) {
    dims s(d.size(), 1);
    for (int i = (int)d.size() - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
    return s;
}

std::vector<char> read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

void write_file(const std::string &path, const void *p, size_t n) {
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char *>(p), (std::streamsize)n);
    if (!f) throw std::runtime_error("cannot write " + path);
}

// A 64-byte-aligned byte buffer (oneDNN kernels prefer aligned data).
struct Buffer {
    std::unique_ptr<char, decltype(&free)> p {nullptr, &free};
    size_t size = 0;
    explicit Buffer(size_t n) : size(n) {
        p.reset(static_cast<char *>(aligned_alloc(64, ((n + 63) / 64) * 64 + 64)));
        std::memset(p.get(), 0, n);
    }
    char *data() const { return p.get(); }
};

Buffer load_exact(const std::string &path, size_t expected) {
    auto v = read_file(path);
    if (v.size() != expected)
        throw std::runtime_error(path + ": expected " + std::to_string(expected)
                + " bytes, got " + std::to_string(v.size()));
    Buffer b(expected);
    std::memcpy(b.data(), v.data(), expected);
    return b;
}

struct Timing {
    double median_s;
    int reps;
};

// Time executes until (reps >= min_reps and total >= min_time), or, for very slow
// cases, until total >= max_time with at least 3 reps. Reports the median.
template <typename F>
Timing time_it(F run, int min_reps, double min_time, double max_time) {
    std::vector<double> t;
    double total = 0;
    for (;;) {
        auto t0 = std::chrono::steady_clock::now();
        run();
        double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        t.push_back(dt);
        total += dt;
        int n = (int)t.size();
        if (n >= min_reps && total >= min_time) break;
        if (n >= 3 && total >= max_time) break;
    }
    std::sort(t.begin(), t.end());
    size_t n = t.size();
    double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    return {med, (int)n};
}

int run(const Args &a) {
    const std::string op_name = a.get("op", "dynamic");
    const bool is_static = op_name == "dequantize";
    const std::string src_t = a.get("src-type"), dst_t = a.get("dst-type");
    const dims shape = parse_dims(a.get("shape"));
    const std::string qtype = a.get("qtype", "per_tensor");
    const int64_t n = numel(shape);
    const bool has_zps = a.has("zps");

    // Logical tensors: ids 0 src, 1 scales, 2 zps, 3 dst. Dense row-major strides.
    lt src_lt(0, parse_dtype(src_t), shape, row_major_strides(shape));
    lt dst_lt(3, parse_dtype(dst_t), shape, row_major_strides(shape));
    op deq(0, is_static ? op::kind::Dequantize : op::kind::DynamicDequantize,
            is_static ? "dequantize" : "dynamic_dequantize");
    deq.set_attr<std::string>(op::attr::qtype, qtype);
    if (a.has("axis")) deq.set_attr<int64_t>(op::attr::axis, std::stoll(a.get("axis")));
    if (a.has("group-shape"))
        deq.set_attr<dims>(op::attr::group_shape, parse_dims(a.get("group-shape")));

    Buffer src = load_exact(a.get("input"), nbytes(src_t, n));
    Buffer dst(nbytes(dst_t, n));
    std::vector<lt> in_lts {src_lt};
    std::vector<Buffer> params;  // scales / zps buffers of the dynamic op

    if (is_static) {
        // Static op: scales and zero points are attributes read from f32 / s64 files.
        auto sv = read_file(a.get("scales"));
        std::vector<float> scales(sv.size() / 4);
        std::memcpy(scales.data(), sv.data(), scales.size() * 4);
        deq.set_attr<std::vector<float>>(op::attr::scales, scales);
        if (has_zps) {
            auto zv = read_file(a.get("zps"));
            std::vector<int64_t> zps(zv.size() / 8);
            std::memcpy(zps.data(), zv.data(), zps.size() * 8);
            deq.set_attr<std::vector<int64_t>>(op::attr::zps, zps);
        }
    } else {
        // Dynamic op: scales (dst dtype) and zps are input tensors.
        dims sshape = a.has("scales-shape") ? parse_dims(a.get("scales-shape")) : dims {1};
        lt sc_lt(1, parse_dtype(dst_t), sshape, row_major_strides(sshape));
        params.push_back(load_exact(a.get("scales"), nbytes(dst_t, numel(sshape))));
        in_lts.push_back(sc_lt);
        if (has_zps) {
            const std::string zt = a.get("zps-type");
            lt zp_lt(2, parse_dtype(zt), sshape, row_major_strides(sshape));
            params.push_back(load_exact(a.get("zps"), nbytes(zt, numel(sshape))));
            in_lts.push_back(zp_lt);
        }
    }
    deq.add_inputs(in_lts);
    deq.add_output(dst_lt);

    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    graph g(dnnl::engine::kind::cpu);
    g.add_op(deq);
    g.finalize();
    auto parts = g.get_partitions();
    if (parts.size() != 1 || !parts[0].is_supported()) {
        std::cout << "unsupported: no supported partition for this op" << std::endl;
        return 3;
    }

    auto t0 = std::chrono::steady_clock::now();
    compiled_partition cp = parts[0].compile(in_lts, {dst_lt}, eng);
    double compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    std::vector<tensor> ins {tensor(in_lts[0], eng, src.data())};
    for (size_t i = 0; i < params.size(); ++i)
        ins.emplace_back(in_lts[i + 1], eng, params[i].data());
    std::vector<tensor> outs {tensor(dst_lt, eng, dst.data())};
    auto exec = [&] {
        cp.execute(strm, ins, outs);
        strm.wait();
    };

    exec();  // first run: produces the output we check
    write_file(a.get("output"), dst.data(), dst.size);

    Timing tm = time_it(exec, std::stoi(a.get("min-reps", "10")),
            std::stod(a.get("min-time", "1.0")), std::stod(a.get("max-time", "3.0")));
    std::printf("{\"status\":\"ok\",\"median_s\":%.9g,\"reps\":%d,\"compile_s\":%.6g}\n",
            tm.median_s, tm.reps, compile_s);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    Args a;
    try {
        a = parse_args(argc, argv);
    } catch (const std::exception &e) {
        std::cerr << e.what() << std::endl;
        return 1;
    }
    // oneDNN's CPU threading runtime is TBB here: OMP_NUM_THREADS has no effect.
    tbb::global_control gc(tbb::global_control::max_allowed_parallelism,
            (size_t)std::stoi(a.get("threads", "1")));
    try {
        return run(a);
    } catch (const dnnl::error &e) {
        // Rejections come out of compile/execute as dnnl::error (e.g. unimplemented).
        std::cout << "unsupported: " << e.what() << std::endl;
        return 3;
    } catch (const std::exception &e) {
        std::cerr << "error: " << e.what() << std::endl;
        return 1;
    }
}
