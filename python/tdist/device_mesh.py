"""torch.distributed.device_mesh: `from tdist.device_mesh import DeviceMesh, init_device_mesh`."""
from ._tdist import DeviceMesh, init_device_mesh  # noqa: F401
