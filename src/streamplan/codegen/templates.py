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


HOST_WAIT_HELPER = '''
def _host_wait(event: torch.cuda.Event | None) -> None:
    """Block the host until `event` has happened, so that nothing launched after
    this runs ahead of it (CPU: the ops before it have already run)."""
    if event is not None:
        event.synchronize()
'''


# A rank program's collectives, as ``runtime.collectives.Communicator`` runs them: one process
# group per communication stream (PROCESS_GROUPS), the same torch.distributed calls, and an
# average as a sum divided after (gloo has no average; every backend divides the same way).
COLLECTIVE_HELPERS = '''
def _process_groups(groups: tuple | None) -> tuple:
    """One process group per row of PROCESS_GROUPS: `groups`, or new ones over all ranks
    (new_group is collective: every rank makes them in the same order)."""
    if not torch.distributed.is_initialized():
        raise RuntimeError("call torch.distributed.init_process_group first")
    if groups is None:
        groups = tuple(torch.distributed.new_group() for _ in PROCESS_GROUPS)
    if len(groups) != len(PROCESS_GROUPS):
        raise ValueError(f"{len(PROCESS_GROUPS)} groups needed, not {len(groups)}")
    for group, (stream, label, size) in zip(groups, PROCESS_GROUPS, strict=True):
        if torch.distributed.get_world_size(group) != size:
            raise ValueError(f"stream {stream} ({label}) needs a group of {size} ranks")
    return tuple(groups)


def _all_gather(
    shard: torch.Tensor, group: torch.distributed.ProcessGroup
) -> torch.Tensor:
    """Every rank's `shard` in rank order, in one new flat tensor."""
    size = torch.distributed.get_world_size(group)
    out = torch.empty(shard.numel() * size, dtype=shard.dtype, device=shard.device)
    torch.distributed.all_gather_single(out, shard.contiguous(), group=group)
    return out.view(-1)


def _reduce_scatter(
    full: torch.Tensor, group: torch.distributed.ProcessGroup, average: bool
) -> torch.Tensor:
    """This rank's part of `full` summed (or averaged) over the ranks, a new tensor."""
    size = torch.distributed.get_world_size(group)
    out = torch.empty(full.numel() // size, dtype=full.dtype, device=full.device)
    torch.distributed.reduce_scatter_single(out, full.contiguous(), group=group)
    if average:
        out.div_(size)
    return out


def _all_reduce(
    tensor: torch.Tensor, group: torch.distributed.ProcessGroup, average: bool
) -> torch.Tensor:
    """`tensor` summed (or averaged) over the ranks, in place."""
    torch.distributed.all_reduce(tensor, group=group)
    if average:
        tensor.div_(torch.distributed.get_world_size(group))
    return tensor
'''


# An FSDP rank's weights from the whole model's: each unit's tensors flattened in one padded
# flat tensor (zeros after the last), cut in as many chunks as ranks, this rank's kept, as
# ``runtime.distributed`` gives each rank its shards.
SHARD_HELPER = '''
def _shard(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` with this rank's shard of each row of SHARDS added, cut from the whole
    tensors it holds (a unit's parameters, or one slot of their optimizer state)."""
    rank = torch.distributed.get_rank()
    ranks = torch.distributed.get_world_size()
    state = dict(state)
    for target, numel, dtype, parts in SHARDS:
        if target in state or not all(name in state for name, _ in parts):
            continue
        device = state[parts[0][0]].device
        flat = torch.zeros(numel, dtype=getattr(torch, dtype), device=device)
        for name, offset in parts:
            part = state[name].detach().reshape(-1)
            flat[offset : offset + part.numel()] = part
        state[target] = flat.chunk(ranks)[rank].clone()
    return state
'''


def init(*, constants_embedded: bool, process_groups: bool = False) -> str:
    """``__init__``: the weights table, with the embedded constants when the module has them; a
    rank program's takes its process groups (or makes them: ``_process_groups``)."""
    table = "CONSTANTS" if constants_embedded else "{}"
    groups = (
        "    # one torch.distributed process group per communication stream (PROCESS_GROUPS)\n"
        "    self.groups = _process_groups(groups)\n"
        if process_groups
        else ""
    )
    return (
        (
            "def __init__(self, groups: tuple | None = None) -> None:\n"
            if process_groups
            else "def __init__(self) -> None:\n"
        )
        + "    super().__init__()\n"
        "    # None: use streams when the inputs are on a CUDA device\n"
        "    self.use_streams: bool | None = None\n"
        "    self._streams: dict[torch.device, tuple[torch.cuda.Stream, ...]] = {}\n"
        f"    self.tensors = _weights_module(WEIGHTS, {table})\n" + groups
    )


def load_weights(*, optimizer_state: bool, renamed: bool = False, sharded: bool = False) -> str:
    """``load_weights``; with optimizer state, a missing state is allowed (it may start at zero);
    with ``RENAMED``, the names it holds are translated first; with ``SHARDS`` (an FSDP rank),
    this rank's shards are cut from the whole tensors given first (``_shard``)."""
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
        + ("    model = _shard(model)\n" if sharded else "")
        + ("    model = {RENAMED.get(k, k): v for k, v in model.items()}\n" if renamed else "")
        + "    missing = self.tensors.load_state_dict(model, strict=False).missing_keys\n"
        + state
        + "    if missing:\n"
        '        raise KeyError(f"state_dict lacks {len(missing)} weights: {missing[0]}...")\n'
    )


def load_optimizer_state(*, renamed: bool = False, sharded: bool = False) -> str:
    """``load_optimizer_state``; with ``RENAMED``, the names it holds are translated first; with
    ``SHARDS``, this rank's shards of the whole state are cut first."""
    load = (
        ("    state = _shard(state)\n" if sharded else "")
        + ("    state = {RENAMED.get(k, k): v for k, v in state.items()}\n" if renamed else "")
        + "    self.tensors.load_state_dict(state, strict=False)\n"
    )
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
