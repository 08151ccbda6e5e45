#!/usr/bin/python3
"""Regenerates the gradient-shape files used by fusion_bench.

Each output file lists one parameter tensor per line, `name dim0 dim1 ...`,
in the model's forward parameter order (PyTorch `named_parameters()` order).
Gradients become ready in the reverse order during backward, so fusion_bench
enqueues the lines bottom to top.

  resnet50.txt   torchvision.models.resnet50()  (161 tensors, 25,557,032)
  vgg16.txt      torchvision.models.vgg16()     (32 tensors, 138,357,544)
  bert_base.txt  BERT-base encoder written from the architecture definition
                 (12 layers, hidden 768, FFN 3072, vocab 30522, 512 positions,
                 2 token types, with pooler; 199 tensors, 109,482,240)

Needs Debian's python3-torchvision for the first two (run with /usr/bin/python3;
no weights are downloaded). Usage: gen_shapes.py [OUTPUT_DIR]
"""

import os
import sys


def torchvision_shapes(name):
    import torchvision  # imported lazily: bert_base needs no torch

    model = getattr(torchvision.models, name)(weights=None)
    return [(n, list(p.shape)) for n, p in model.named_parameters()]


def bert_base_shapes(layers=12, hidden=768, ffn=3072, vocab=30522,
                     positions=512, token_types=2):
    """Parameter shapes of Hugging Face's BertModel for bert-base."""
    shapes = [
        ("embeddings.word_embeddings.weight", [vocab, hidden]),
        ("embeddings.position_embeddings.weight", [positions, hidden]),
        ("embeddings.token_type_embeddings.weight", [token_types, hidden]),
        ("embeddings.LayerNorm.weight", [hidden]),
        ("embeddings.LayerNorm.bias", [hidden]),
    ]
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for proj in ("query", "key", "value"):
            shapes.append((p + f"attention.self.{proj}.weight", [hidden, hidden]))
            shapes.append((p + f"attention.self.{proj}.bias", [hidden]))
        shapes += [
            (p + "attention.output.dense.weight", [hidden, hidden]),
            (p + "attention.output.dense.bias", [hidden]),
            (p + "attention.output.LayerNorm.weight", [hidden]),
            (p + "attention.output.LayerNorm.bias", [hidden]),
            (p + "intermediate.dense.weight", [ffn, hidden]),
            (p + "intermediate.dense.bias", [ffn]),
            (p + "output.dense.weight", [hidden, ffn]),
            (p + "output.dense.bias", [hidden]),
            (p + "output.LayerNorm.weight", [hidden]),
            (p + "output.LayerNorm.bias", [hidden]),
        ]
    shapes += [("pooler.dense.weight", [hidden, hidden]),
               ("pooler.dense.bias", [hidden])]
    return shapes


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def write(path, model, source, shapes):
    total = sum(numel(s) for _, s in shapes)
    with open(path, "w") as f:
        f.write(f"# {model}: {len(shapes)} parameter tensors, {total} elements\n")
        f.write(f"# source: {source}\n")
        f.write("# order: forward (named_parameters); backward is bottom to top\n")
        f.write("# format: name dim0 dim1 ...\n")
        for name, shape in shapes:
            f.write(" ".join([name] + [str(d) for d in shape]) + "\n")
    print(f"{path}: {len(shapes)} tensors, {total} elements")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.abspath(__file__))
    for name in ("resnet50", "vgg16"):
        write(os.path.join(out, f"{name}.txt"), name,
              f"torchvision.models.{name}(weights=None)", torchvision_shapes(name))
    write(os.path.join(out, "bert_base.txt"), "bert_base",
          "BERT-base architecture (gen_shapes.py: bert_base_shapes)",
          bert_base_shapes())


if __name__ == "__main__":
    main()
