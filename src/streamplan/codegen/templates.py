"""streamplan's own code in every generated module: the helper functions and the methods of
the generated class other than ``forward``.

These texts hold nothing from the graph: ``render.Fixed`` writes them as they are and
``check`` requires a generated module's copies to be exactly these (compared as ``ast``
trees). Methods are written here unindented; ``render`` indents them into the class.
"""

FOLD_HELPER = '''
def _fold_batch_norm(
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    mean: torch.Tensor,
    var: torch.Tensor,
    gamma: torch.Tensor | None,
    beta: torch.Tensor | None,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A convolution's weight and bias with the batch-norm after it folded in."""
    scale = torch.rsqrt(var + eps)
    if gamma is not None:
        scale = scale * gamma
    shift = -mean * scale
    if beta is not None:
        shift = shift + beta
    folded = weight * scale.reshape(-1, *([1] * (weight.dim() - 1)))
    return folded, shift if bias is None else bias * scale + shift
'''


HELPERS = '''
def _weights_module(table: tuple, constants: dict) -> torch.nn.Module:
    """Each weight under its state_dict name, in modules nested as in the model."""
    root = torch.nn.Module()
    for key, shape, dtype, kind in table:
        *path, name = key.split(".")
        owner = root
        for part in path:
            if part not in owner._modules:
                owner.add_module(part, torch.nn.Module())
            owner = owner._modules[part]
        tensor = torch.zeros(shape, dtype=getattr(torch, dtype))
        if key in constants:
            tensor = torch.tensor(constants[key], dtype=tensor.dtype).reshape(shape)
        if kind == "param":
            owner.register_parameter(name, torch.nn.Parameter(tensor))
        else:
            owner.register_buffer(name, tensor, persistent=key not in constants)
    return root


def _weights(tensors: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every weight by its state_dict name."""
    found = dict(tensors.named_parameters())
    found.update(tensors.named_buffers())
    return found


def _on(stream: torch.cuda.Stream | None) -> contextlib.AbstractContextManager:
    """Launch on `stream` inside the block (CPU: in order, on the host)."""
    return contextlib.nullcontext() if stream is None else torch.cuda.stream(stream)


def _event(stream: torch.cuda.Stream | None) -> torch.cuda.Event | None:
    """An event recorded on `stream` after the work launched on it so far."""
    if stream is None:
        return None
    event = torch.cuda.Event()
    event.record(stream)
    return event


def _wait(stream: torch.cuda.Stream | None, event: torch.cuda.Event | None) -> None:
    """Make `stream` wait for `event` before what is launched on it next."""
    if stream is not None:
        stream.wait_event(event)


def _hand_over(tensor: torch.Tensor, stream: torch.cuda.Stream | None) -> None:
    """Tell the caching allocator `tensor` is used on `stream`: its block is not reused
    until that stream's work queued by the time it is freed is done."""
    if stream is not None:
        tensor.record_stream(stream)


def _join(caller: torch.cuda.Stream | None, streams: tuple) -> None:
    """Make the caller's stream wait for everything launched on the side streams."""
    if caller is not None:
        for stream in streams:
            caller.wait_stream(stream)
'''


def init(*, constants_embedded: bool) -> str:
    """``__init__``: the weights table, with the embedded constants when the module has them."""
    table = "CONSTANTS" if constants_embedded else "{}"
    return (
        "def __init__(self) -> None:\n"
        "    super().__init__()\n"
        "    # None: use streams when the inputs are on a CUDA device\n"
        "    self.use_streams: bool | None = None\n"
        "    self._streams: dict[torch.device, tuple[torch.cuda.Stream, ...]] = {}\n"
        f"    self.tensors = _weights_module(WEIGHTS, {table})\n"
    )


def load_weights(*, optimizer_state: bool, renamed: bool = False) -> str:
    """``load_weights``; with optimizer state, a missing state is allowed (it may start at zero);
    with ``RENAMED``, the names it holds are translated first."""
    state = (
        "    # optimizer state may start at zero: torch.optim's state before a first step\n"
        '    missing = [k for k in missing if not k.startswith("optimizer_state.")]\n'
        if optimizer_state
        else ""
    )
    return (
        "def load_weights(self, model: torch.nn.Module | dict[str, torch.Tensor]) -> None:\n"
        '    """Copy the weights the graph reads from the model (or a state_dict)."""\n'
        "    if isinstance(model, torch.nn.Module):  # buffers left out of state_dict too\n"
        "        model = {**dict(model.named_buffers()), **model.state_dict()}\n"
        + ("    model = {RENAMED.get(k, k): v for k, v in model.items()}\n" if renamed else "")
        + "    missing = self.tensors.load_state_dict(model, strict=False).missing_keys\n"
        + state
        + "    if missing:\n"
        '        raise KeyError(f"state_dict lacks {len(missing)} weights: {missing[0]}...")\n'
    )


def load_optimizer_state(*, renamed: bool = False) -> str:
    """``load_optimizer_state``; with ``RENAMED``, the names it holds are translated first."""
    load = (
        "    state = {RENAMED.get(k, k): v for k, v in state.items()}\n" if renamed else ""
    ) + "    self.tensors.load_state_dict(state, strict=False)\n"
    return (
        "def load_optimizer_state(\n"
        "    self, optimizer: torch.optim.Optimizer, model: torch.nn.Module\n"
        ") -> None:\n"
        '    """Copy torch.optim\'s state of the model\'s parameters (momentum, moments)."""\n'
        "    names = {id(p): n for n, p in model.named_parameters()}\n"
        "    state = {}\n"
        "    for param, slots in optimizer.state.items():\n"
        "        for slot, tensor in slots.items():\n"
        '            if slot != "step" and id(param) in names:\n'
        '                state[f"optimizer_state.{names[id(param)]}.{slot}"] = tensor\n' + load
    )


FORK = '''
def _fork(self, device: torch.device, count: int) -> tuple:
    """The caller's stream and `count` side streams that wait for it (or None)."""
    use = device.type == "cuda" if self.use_streams is None else self.use_streams
    if not use:
        return None, (None,) * count
    caller = torch.cuda.current_stream()
    streams = self._streams.get(device)
    if streams is None:
        streams = tuple(torch.cuda.Stream() for _ in range(count))
        self._streams[device] = streams
    for stream in streams:
        stream.wait_stream(caller)
    return caller, streams
'''
