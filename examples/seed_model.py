"""The seed document's 10-op example: a branchy pointwise chain, a mean, and its epilogue.

x is f32[1024, 1024]; bias, gamma, beta are f32[1024]. Inductor fuses it into one persistent
reduction kernel (triton_per_fused_add_mean_mul_relu_sub_0); so does autofuse's default plan.
"""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x, bias, gamma, beta):
        t = x * 1.1 + bias                # broadcasting + pointwise
        a = torch.relu(t)
        p = a * a                         # two branches
        q = a * 0.1
        s = p + q                         # merge branches
        m = s.mean(dim=1, keepdim=True)   # reduction
        y = (s - m) * gamma + beta        # pointwise epilogue
        return y


def get_inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1024, 1024, generator=g), torch.randn(1024, generator=g),
            torch.randn(1024, generator=g), torch.randn(1024, generator=g)]


def get_init_inputs():
    return []
