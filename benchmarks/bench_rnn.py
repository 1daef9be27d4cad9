"""Recurrent layers and batch norm, forward + backward: adcuda vs PyTorch on the same seeded data.

Cases: one LSTM layer over a sequence (seq 32, batch 32, 128 -> 256), the same for a GRU, and one
LSTMCell step; each a forward, a summed loss and a backward. On the CPU both run one thread. On a GPU
(``--device cuda``) adcuda is timed with CUDA events against PyTorch (cuDNN's LSTM), and one line
reports batch-norm training forward (the batch_norm kernels of kernels/norm.cu) on a (256, 64, 56, 56)
fp32 tensor as a bandwidth and its percent of the measured device copy, counting the least traffic
it needs: x read once for the statistics, read again and y written to normalise (3 bytes per input
byte; the second statistics pass re-reads each channel's 3 MB from L2). In the emulated build the
suite checks the LSTM and batch norm against the CPU at small sizes and prints no timing.

    python benchmarks/bench_rnn.py [--quick] [--device cpu|cuda] [--threads N] [--json out.json]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (  # noqa: E402
    adcuda_event_seconds,
    copy_bandwidth,
    device_contender_main,
    format_bandwidth,
    framework_event_seconds,
    median_time,
    parse_suite_args,
    print_ms_table,
    run_contenders_on_device,
    single_thread_env,
    suite_parser,
    write_report,
)

SEQ, BATCH, INPUT, HIDDEN = 32, 32, 128, 256
BN_SHAPE = (256, 64, 56, 56)


def _sequence_case(lib, device, cls):
    import numpy as np

    lib.manual_seed(0)
    layer = getattr(lib.nn, cls)(INPUT, HIDDEN).to(device)
    x = lib.tensor(
        np.random.default_rng(0).standard_normal((SEQ, BATCH, INPUT)).astype(np.float32),
        device=device,
        requires_grad=True,
    )

    def step():
        out, _ = layer(x)
        out.sum().backward()

    return step


def _cell_case(lib, device):
    import numpy as np

    lib.manual_seed(0)
    cell = lib.nn.LSTMCell(INPUT, HIDDEN).to(device)
    r = np.random.default_rng(1)
    x = lib.tensor(r.standard_normal((BATCH, INPUT)).astype(np.float32), device=device)
    h = lib.tensor(r.standard_normal((BATCH, HIDDEN)).astype(np.float32), device=device, requires_grad=True)
    c = lib.tensor(r.standard_normal((BATCH, HIDDEN)).astype(np.float32), device=device, requires_grad=True)

    def step():
        h_new, c_new = cell(x, (h, c))
        (h_new.sum() + c_new.sum()).backward()

    return step


def _cases(lib, device):
    return {
        f"LSTM seq {SEQ} x batch {BATCH}, {INPUT}->{HIDDEN}, fwd+bwd": _sequence_case(lib, device, "LSTM"),
        f"GRU seq {SEQ} x batch {BATCH}, {INPUT}->{HIDDEN}, fwd+bwd": _sequence_case(lib, device, "GRU"),
        f"LSTMCell step, batch {BATCH}, fwd+bwd": _cell_case(lib, device),
    }


def contender(name, device, quick):
    threads = single_thread_env()
    if name == "torch":
        import torch as lib

        lib.set_num_threads(threads)
    else:
        import adcuda as lib
    times = {}
    for case, step in _cases(lib, device).items():
        if device == "cuda":
            if name == "torch":
                times[case] = framework_event_seconds(lib, step)
            else:
                times[case] = adcuda_event_seconds(step)
        else:
            times[case] = median_time(step, repeat=5 if quick else 9)
    if device == "cuda" and name == "adcuda":
        times["batch_norm bandwidth"] = _batch_norm_seconds()
    return times


def _batch_norm_seconds():
    import adcuda
    import adcuda.nn.functional as F

    x = adcuda.randn(*BN_SHAPE, device="cuda")
    return adcuda_event_seconds(lambda: F.batch_norm(x, None, None, training=True))


def _checks_on_the_emulator():
    """An LSTM and batch norm on the emulated GPU against the CPU at small sizes."""
    import numpy as np

    import adcuda
    import adcuda.nn.functional as F

    layer = adcuda.nn.LSTM(5, 7, num_layers=2)
    gpu_layer = adcuda.nn.LSTM(5, 7, num_layers=2)
    gpu_layer.load_state_dict(layer.state_dict())
    gpu_layer.to("cuda")
    x = np.random.default_rng(2).standard_normal((4, 3, 5)).astype(np.float32)
    want, got = layer(adcuda.tensor(x))[0].detach().numpy(), gpu_layer(adcuda.tensor(x, device="cuda"))[0]
    if not np.allclose(got.detach().cpu().numpy(), want, atol=1e-5):
        raise SystemExit("bench_rnn: the emulated LSTM differs from the CPU's")
    y = np.random.default_rng(3).standard_normal((4, 3, 5, 5)).astype(np.float32)
    bn_cpu = F.batch_norm(adcuda.tensor(y), None, None, training=True).numpy()
    bn_gpu = F.batch_norm(adcuda.tensor(y, device="cuda"), None, None, training=True).cpu().numpy()
    if not np.allclose(bn_gpu, bn_cpu, atol=1e-5):
        raise SystemExit("bench_rnn: the emulated batch norm differs from the CPU's")


def main():
    args = parse_suite_args(suite_parser(__doc__, device=True))
    results = run_contenders_on_device(os.path.abspath(__file__), "rnn", args, [_checks_on_the_emulator])
    if results is None:
        return
    bn_seconds = results.get("adcuda", {}).pop("batch_norm bandwidth", None)
    rows = print_ms_table(f"Recurrent layers, forward + backward, on {args.device}", results)
    report = {"suite": "rnn", "device": args.device, "rows": rows}
    if bn_seconds is not None:
        import numpy as np

        moved = 3 * int(np.prod(BN_SHAPE)) * 4
        line = format_bandwidth(moved, bn_seconds, copy_bandwidth())
        print(f"\nbatch_norm training forward {BN_SHAPE} fp32: {line}")
        report["batch_norm_bandwidth"] = line
    write_report(args.json, report)


if __name__ == "__main__":
    if "--contender" in sys.argv:
        device_contender_main(contender)
    else:
        main()
