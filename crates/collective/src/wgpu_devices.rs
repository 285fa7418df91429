//! Several separate wgpu clients on one adapter, standing in for several GPUs: each has its
//! own memory, so data only moves between them through a transport. With Mesa's software
//! Vulkan driver (lavapipe) this runs on any Linux machine.

use crate::error::panic_message;
use crate::Unavailable;
use cubecl::wgpu::{
    init_device, init_setup, AutoGraphicsApi, RuntimeOptions, WgpuDevice, WgpuSetup,
};
use std::sync::Mutex;

struct Pool {
    setup: WgpuSetup,
    /// Each device with the wgpu device and queue its client drives.
    devices: Vec<(WgpuDevice, WgpuSetup)>,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

/// `n` distinct wgpu devices (created on first use and shared by the whole process).
/// Fails with a readable reason when no adapter is present (install Mesa's Vulkan driver:
/// `apt-get install mesa-vulkan-drivers libvulkan1`).
pub fn wgpu_devices(n: usize) -> Result<Vec<WgpuDevice>, Unavailable> {
    let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if pool.is_none() {
        let setup = std::panic::catch_unwind(|| {
            init_setup::<AutoGraphicsApi>(&WgpuDevice::DefaultDevice, RuntimeOptions::default())
        })
        .map_err(|p| Unavailable::NoWgpuAdapter(panic_message(p.as_ref())))?;
        *pool = Some(Pool {
            devices: vec![(WgpuDevice::DefaultDevice, setup.clone())],
            setup,
        });
    }
    let pool = pool.as_mut().expect("initialized above");
    while pool.devices.len() < n {
        let adapter = &pool.setup.adapter;
        let descriptor = wgpu::DeviceDescriptor {
            label: Some("firemesh rank"),
            required_features: adapter
                .features()
                .difference(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS),
            required_limits: adapter.limits(),
            memory_hints: wgpu::MemoryHints::MemoryUsage,
            ..Default::default()
        };
        let (device, queue) = cubecl::future::block_on(adapter.request_device(&descriptor))
            .map_err(|e| Unavailable::WgpuDeviceRefused(e.to_string()))?;
        let setup = WgpuSetup {
            device,
            queue,
            ..pool.setup.clone()
        };
        let device = init_device(setup.clone(), RuntimeOptions::default());
        pool.devices.push((device, setup));
    }
    Ok(pool.devices[..n].iter().map(|(d, _)| d.clone()).collect())
}

/// The wgpu device and queue behind `device`, if [`wgpu_devices`] created it.
pub(crate) fn setup_of(device: &WgpuDevice) -> Option<WgpuSetup> {
    let pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let pool = pool.as_ref()?;
    let found = pool.devices.iter().find(|(d, _)| d == device);
    found.map(|(_, setup)| setup.clone())
}

/// The adapter that [`wgpu_devices`] opens: its name, and whether it is a software
/// rasterizer on the CPU (Mesa's lavapipe, say) rather than a GPU.
pub fn wgpu_adapter() -> Result<(String, bool), Unavailable> {
    wgpu_devices(1)?;
    let pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let info = pool
        .as_ref()
        .expect("opened above")
        .setup
        .adapter
        .get_info();
    Ok((info.name, info.device_type == wgpu::DeviceType::Cpu))
}
