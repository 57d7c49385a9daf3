"""The model suite: real model code with small configs and seeded weights (no downloads).

Each entry builds a module, makes its eval inputs for a batch size, and defines a train loss
over the module's outputs. Everything is deterministic given the seed."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 1337


@dataclass(frozen=True)
class ModelSpec:
    name: str
    suite: str                     # "huggingface" | "torchvision-style" | "recsys" | "toy"
    build: Callable[[], nn.Module]
    make_inputs: Callable[[int, torch.Generator], Tuple[Tuple[Any, ...], Dict[str, Any]]]
    loss: Callable[[Any], torch.Tensor]
    batch_size: int
    description: str
    imports: Tuple[str, ...] = ()  # modules registering the model's host ops (parity's own suite: approved)


# ---------------------------------------------------------------- hand-written nets
class MLP(nn.Module):
    def __init__(self, d_in=64, hidden=128, d_out=16, depth=4):
        super().__init__()
        dims = [d_in] + [hidden] * depth
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.head = nn.Linear(hidden, d_out)

    def forward(self, x):
        for layer in self.layers:
            x = F.gelu(layer(x))
        return self.head(x)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + idt)


class ResNetish(nn.Module):
    """A ResNet-18-style network at toy width: stem, 4 stages of basic blocks, pooling, fc."""

    def __init__(self, width=16, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        chans = [width, width * 2, width * 4, width * 8]
        blocks, cin = [], width
        for i, c in enumerate(chans):
            blocks += [BasicBlock(cin, c, 1 if i == 0 else 2), BasicBlock(c, c, 1)]
            cin = c
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.block = nn.Sequential(
            nn.Conv2d(cin, hid, 1, bias=False), nn.BatchNorm2d(hid), nn.ReLU6(),
            nn.Conv2d(hid, hid, 3, stride, 1, groups=hid, bias=False), nn.BatchNorm2d(hid), nn.ReLU6(),
            nn.Conv2d(hid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.block(x)
        return x + y if self.use_res else y


class MobileNetish(nn.Module):
    """MobileNetV2-style: inverted residuals with depthwise convolutions."""

    def __init__(self, num_classes=10):
        super().__init__()
        cfg = [(16, 1, 1), (24, 2, 4), (24, 1, 4), (32, 2, 4), (32, 1, 4), (64, 2, 4)]
        layers = [nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6()]
        cin = 16
        for cout, stride, expand in cfg:
            layers.append(InvertedResidual(cin, cout, stride, expand))
            cin = cout
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.features(x)
        return self.classifier(x.mean(dim=(2, 3)))


class DLRMish(nn.Module):
    """DLRM-style: dense MLP, sparse features through EmbeddingBags, pairwise dot interaction."""

    def __init__(self, num_dense=13, tables=(100, 80, 60, 40), dim=16):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(num_dense, 32), nn.ReLU(), nn.Linear(32, dim), nn.ReLU())
        self.embs = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum") for n in tables)
        n = len(tables) + 1
        self.top = nn.Sequential(nn.Linear(dim + n * (n - 1) // 2, 32), nn.ReLU(), nn.Linear(32, 1))
        self.register_buffer("tri", torch.triu_indices(n, n, offset=1), persistent=False)

    def forward(self, dense, indices, offsets):
        x = self.bottom(dense)
        feats = [x] + [emb(indices[i], offsets[i]) for i, emb in enumerate(self.embs)]
        t = torch.stack(feats, dim=1)
        inter = torch.bmm(t, t.transpose(1, 2))
        flat = inter[:, self.tri[0], self.tri[1]]
        return torch.sigmoid(self.top(torch.cat([x, flat], dim=1)))


# ---------------------------------------------------------------- transformers models
def _hf(config_cls_name: str, model_cls_name: str, **cfg):
    def build():
        import transformers
        config = getattr(transformers, config_cls_name)(**cfg)
        config.use_cache = False
        # Dropout off: train-mode results must not depend on which process drew the random
        # numbers (parity's C++ eager and a Python backend use different RNG call orders).
        for key, value in config.to_dict().items():
            if "dropout" in key and isinstance(value, float):
                setattr(config, key, 0.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = getattr(transformers, model_cls_name)(config)
        return model
    return build


_LLAMA = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128)


def _ids(vocab: int, seq: int):
    def make(batch: int, g: torch.Generator):
        return (torch.randint(0, vocab, (batch, seq), generator=g),), {}
    return make


def _seq2seq(vocab: int, seq: int):
    def make(batch: int, g: torch.Generator):
        return (), {"input_ids": torch.randint(0, vocab, (batch, seq), generator=g),
                    "decoder_input_ids": torch.randint(0, vocab, (batch, seq // 2), generator=g)}
    return make


def _image(size: int):
    def make(batch: int, g: torch.Generator):
        return (torch.randn(batch, 3, size, size, generator=g),), {}
    return make


def _dlrm_inputs(batch: int, g: torch.Generator):
    tables, per_bag = (100, 80, 60, 40), 3
    dense = torch.randn(batch, 13, generator=g)
    idx = torch.stack([torch.randint(0, n, (batch * per_bag,), generator=g) for n in tables])
    offs = torch.arange(0, batch * per_bag, per_bag).repeat(len(tables), 1)
    return (dense, idx, offs), {}


def _logits_loss(out) -> torch.Tensor:
    logits = out["logits"] if isinstance(out, dict) or hasattr(out, "keys") else out
    return logits.float().square().mean()


def _plain_loss(out) -> torch.Tensor:
    return out.float().square().mean()


def _mlp_inputs(batch: int, g: torch.Generator):
    return (torch.randn(batch, 64, generator=g),), {}


MODELS: Dict[str, ModelSpec] = {s.name: s for s in [
    ModelSpec("llama", "huggingface", _hf("LlamaConfig", "LlamaForCausalLM", **_LLAMA), _ids(256, 32),
              _logits_loss, 2, "LlamaForCausalLM, 2 layers, hidden 64, GQA 4/2 heads"),
    ModelSpec("mistral", "huggingface", _hf("MistralConfig", "MistralForCausalLM", **_LLAMA, sliding_window=16),
              _ids(256, 32), _logits_loss, 2, "MistralForCausalLM, 2 layers, sliding window 16"),
    ModelSpec("qwen2", "huggingface", _hf("Qwen2Config", "Qwen2ForCausalLM", **_LLAMA), _ids(256, 32),
              _logits_loss, 2, "Qwen2ForCausalLM, 2 layers, hidden 64"),
    ModelSpec("gpt2", "huggingface", _hf("GPT2Config", "GPT2LMHeadModel", vocab_size=256, n_positions=128, n_embd=64,
                                         n_layer=2, n_head=4), _ids(256, 32), _logits_loss, 2,
              "GPT2LMHeadModel, 2 layers, 4 heads, 64 wide"),
    ModelSpec("bert", "huggingface", _hf("BertConfig", "BertForMaskedLM", vocab_size=256, hidden_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                         max_position_embeddings=128), _ids(256, 32), _logits_loss, 2,
              "BertForMaskedLM, 2 layers, hidden 64"),
    ModelSpec("t5", "huggingface", _hf("T5Config", "T5ForConditionalGeneration", vocab_size=256, d_model=64, d_kv=16,
                                       d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4),
              _seq2seq(256, 16), _logits_loss, 2, "T5ForConditionalGeneration (encoder-decoder), 2+2 layers"),
    ModelSpec("resnet", "torchvision-style", ResNetish, _image(32), _plain_loss, 4,
              "ResNet-18-style CNN with BatchNorm, width 16, 32x32 images"),
    ModelSpec("mobilenet", "torchvision-style", MobileNetish, _image(32), _plain_loss, 4,
              "MobileNetV2-style net with depthwise convolutions"),
    ModelSpec("dlrm", "recsys", DLRMish, _dlrm_inputs, _plain_loss, 8,
              "DLRM-style: bottom MLP, 4 EmbeddingBags, dot interaction, top MLP"),
    ModelSpec("mlp", "toy", MLP, _mlp_inputs, _plain_loss, 8, "4-layer GELU MLP, 64 -> 128 -> 16"),
    ModelSpec("mixtral", "huggingface", _hf("MixtralConfig", "MixtralForCausalLM", **_LLAMA, num_local_experts=4,
                                            num_experts_per_tok=2), _ids(256, 32), _logits_loss, 2,
              "MixtralForCausalLM (Mixture of Experts), 2 layers, 4 experts top-2: the experts run in "
              "transformers' custom op grouped_mm_fallback (a host op)", ("transformers.integrations.moe",)),
]}


def build(name: str, batch_size: int | None = None):
    """Returns (spec, model, args, kwargs), all seeded."""
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    spec = MODELS[name]
    torch.manual_seed(SEED)
    model = spec.build()
    g = torch.Generator().manual_seed(SEED)
    args, kwargs = spec.make_inputs(batch_size or spec.batch_size, g)
    return spec, model, args, kwargs


def names() -> List[str]:
    return list(MODELS)
