//! `Sharded<B>`: the backend type and its `Backend` impl. The ops live in `ops/`, one file per
//! trait; the placement rules they use live in `rules/`.

use crate::exec::on_device_stream;
use crate::kind::{BoolKind, FloatKind, IntKind, QuantizedKind};
use crate::mesh::{mesh_count, Mesh, MeshError, MESH_TYPE_ID};
use crate::tensor::ShardedTensor;
use burn_backend::{Backend, BackendTypes, DType, DTypeUsageSet, ExecutionError};
use firemesh_collective::panic_message;
use std::marker::PhantomData;

/// A Burn backend whose device is a [`Mesh`] of inner devices and whose tensors hold one inner
/// tensor per rank, with a [`Placement`](crate::Placement).
pub struct Sharded<B> {
    inner: PhantomData<B>,
}

impl<B> Clone for Sharded<B> {
    fn clone(&self) -> Self {
        Self { inner: PhantomData }
    }
}

impl<B> Default for Sharded<B> {
    fn default() -> Self {
        Self { inner: PhantomData }
    }
}

impl<B: Backend> core::fmt::Debug for Sharded<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Sharded<{}>", core::any::type_name::<B>())
    }
}

impl<B: Backend> BackendTypes for Sharded<B> {
    type Device = Mesh<B::Device>;
    type FloatTensorPrimitive = ShardedTensor<B, FloatKind>;
    type FloatElem = B::FloatElem;
    type IntTensorPrimitive = ShardedTensor<B, IntKind>;
    type IntElem = B::IntElem;
    type BoolTensorPrimitive = ShardedTensor<B, BoolKind>;
    type BoolElem = B::BoolElem;
    type QuantizedTensorPrimitive = ShardedTensor<B, QuantizedKind>;
}

impl<B: Backend> Backend for Sharded<B> {
    fn name(mesh: &Self::Device) -> String {
        format!("sharded<{}>x{}", B::name(mesh.device(0)), mesh.len())
    }

    /// Seeds every rank's device with the same seed, so a `Replicated` random draw is one draw,
    /// and restarts the mesh's per-rank streams (dropout masks) from the same seed.
    fn seed(mesh: &Self::Device, seed: u64) {
        for device in unique(mesh) {
            B::seed(device, seed);
        }
        mesh.seed_streams(seed);
    }

    fn ad_enabled(mesh: &Self::Device) -> bool {
        B::ad_enabled(mesh.device(0))
    }

    /// The inner backend's persistent allocation mode where every rank shares one device;
    /// across devices `func` runs once, in the default mode (the inner calls cannot be nested
    /// for a `func` that is only `Send`).
    fn memory_persistent_allocations<O: Send, I: Send, F: Fn(I) -> O + Send>(
        mesh: &Self::Device,
        input: I,
        func: F,
    ) -> O {
        match unique(mesh)[..] {
            [device] => {
                on_device_stream::<B, _>(|| B::memory_persistent_allocations(device, input, func))
            }
            _ => func(input),
        }
    }

    fn sync(mesh: &Self::Device) -> Result<(), ExecutionError> {
        mesh.wait_issued();
        on_device_stream::<B, _>(|| unique(mesh).into_iter().try_for_each(B::sync))
    }

    fn memory_cleanup(mesh: &Self::Device) {
        on_device_stream::<B, _>(|| unique(mesh).into_iter().for_each(B::memory_cleanup));
    }

    fn supports_dtype(mesh: &Self::Device, dtype: DType) -> bool {
        unique(mesh)
            .into_iter()
            .all(|d| B::supports_dtype(d, dtype))
    }

    fn dtype_usage(mesh: &Self::Device, dtype: DType) -> DTypeUsageSet {
        unique(mesh)
            .into_iter()
            .map(|d| B::dtype_usage(d, dtype))
            .reduce(|a, b| a & b)
            .unwrap_or_default()
    }

    fn device_count(type_id: u16) -> usize {
        if type_id == MESH_TYPE_ID {
            mesh_count::<B::Device>()
        } else {
            0
        }
    }

    fn staging<'a, Iter>(data: Iter, mesh: &Self::Device)
    where
        Iter: Iterator<Item = &'a mut burn_backend::TensorData>,
    {
        on_device_stream::<B, _>(|| B::staging(data, mesh.device(0)));
    }
}

impl<B: Backend> Sharded<B> {
    /// A mesh over `devices` whose every device has been tried: a device that does not exist,
    /// cannot upload and read back one element, or cannot run a kernel on it (a GPU machine
    /// without the kernel compiler, say) is an error, not a later panic or silent garbage.
    pub fn mesh(devices: Vec<B::Device>) -> Result<Mesh<B::Device>, MeshError> {
        Self::tried(Mesh::new(devices)?)
    }

    /// [`Sharded::mesh`] as this process's share of the world `link` joins
    /// ([`Mesh::in_world`]: every process of the world calls it at once).
    pub fn world_mesh(
        devices: Vec<B::Device>,
        link: std::sync::Arc<dyn firemesh_world::ProcessLink>,
    ) -> Result<Mesh<B::Device>, MeshError> {
        Self::tried(Mesh::in_world(devices, link)?)
    }

    /// `mesh`, once each of its devices has been tried.
    fn tried(mesh: Mesh<B::Device>) -> Result<Mesh<B::Device>, MeshError> {
        for (rank, device) in mesh.devices().iter().enumerate() {
            if mesh.devices()[..rank].contains(device) {
                continue;
            }
            try_device::<B>(device).map_err(|reason| MeshError::DeviceMissing {
                rank,
                device: format!("{device:?}"),
                reason,
            })?;
        }
        Ok(mesh)
    }
}

/// Uploads one element, adds one to it on the device and reads it back, turning a panic into
/// its message. A backend whose kernels cannot be compiled may only log the failure and leave
/// the output unwritten, so the value itself is checked.
fn try_device<B: Backend>(device: &B::Device) -> Result<(), String> {
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        on_device_stream::<B, _>(|| {
            let data = burn_backend::TensorData::from([1.0f32]);
            let t = B::float_add_scalar(B::float_from_data(data, device), 1.0f32.into());
            burn_backend::try_read_sync(B::float_into_data(t))
        })
    }));
    match attempt {
        Ok(Some(Ok(data))) => match data.convert::<f32>().to_vec::<f32>() {
            Ok(v) if v == [2.0] => Ok(()),
            got => Err(format!(
                "a kernel computing 1 + 1 on the device gave {got:?}: its kernels do not run \
                 (is the kernel compiler installed?)"
            )),
        },
        Ok(Some(Err(e))) => Err(e.to_string()),
        Ok(None) => Err("the device cannot be read synchronously".into()),
        Err(payload) => Err(format!(
            "running a one-element kernel panicked: {}",
            panic_message(payload.as_ref())
        )),
    }
}

/// The distinct inner devices of a mesh, in rank order.
fn unique<D: burn_backend::DeviceOps>(mesh: &Mesh<D>) -> Vec<&D> {
    let mut out: Vec<&D> = Vec::new();
    for d in mesh.devices() {
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}
