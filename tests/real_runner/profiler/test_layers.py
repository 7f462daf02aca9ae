import torch

from real_runner.model import GPT, build_layer
from real_runner.plans import model_spec
from real_runner.profiler.layers import layer_item, order_items
from real_runner.profiler.timing import Stopwatch


class _Clock:
    """A fake clock that advances by the next value of ``steps`` at every reading."""

    def __init__(self, steps: list[float]) -> None:
        self.t, self.steps = 0.0, iter(steps)

    def __call__(self) -> float:
        self.t += next(self.steps)
        return self.t


def test_repeated_layer_item_drops_the_first_call_and_averages_the_rest():
    spec = model_spec("gpt__tiny")
    block = build_layer(spec, 1)
    calls = []
    block.register_forward_hook(lambda *args: calls.append(1))
    watch = Stopwatch(torch.device("cpu"), "cpu")
    # three calls, marks (start, after forward, after backward) each: lap lengths 9/9, 2/4, 4/6
    watch._now = _Clock([0, 9, 9, 0, 2, 4, 0, 4, 6])
    fw, bw = layer_item(block, spec, "block", 2, torch.device("cpu"), repeats=3)(watch)
    assert len(calls) == 3
    assert (fw, bw) == (3.0, 5.0)
    watch._now = _Clock([0, 7, 8])
    assert layer_item(block, spec, "block", 2, torch.device("cpu"))(watch) == [7.0, 8.0]


def test_order_items_run_the_same_micro_batches_in_the_two_orders():
    model = GPT(model_spec("gpt__tiny"))
    events: list[str] = []
    model.head.register_forward_hook(lambda *args: events.append("F"))
    model.head.register_full_backward_hook(lambda *args: events.append("B"))
    accumulate, held = order_items(model, 2, 3, torch.device("cpu"))
    watch = Stopwatch(torch.device("cpu"), "cpu")
    laps = accumulate(watch)
    assert len(laps) == 1 and laps[0] > 0
    assert "".join(events) == "FB" + "FB" * 3  # an untimed warm start, then each backward right after its forward
    grads = [p.grad.clone() for p in model.parameters()]
    events.clear()
    held(watch)
    assert "".join(events) == "FB" + "FFF" + "BBB"  # every forward, then every backward
    for p, g in zip(model.parameters(), grads):
        torch.testing.assert_close(p.grad, g, rtol=1e-5, atol=1e-7)  # the same micro-batches, the same gradients
