//! Choosing the device tensors live on, from a config's `device` (`"auto"`, `"cpu"`, `"cuda"`,
//! `"cuda:N"`).

use agentrl_core::{Error, Result};
use tch::Device;

/// Where tensors should live, by name, before checking what the machine has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    /// CUDA when available, else the CPU.
    Auto,
    /// The CPU.
    Cpu,
    /// CUDA device N.
    Cuda(usize),
}

/// Parses `"auto"`, `"cpu"`, `"cuda"` or `"cuda:N"`.
pub fn parse_device_name(name: &str) -> std::result::Result<DeviceChoice, String> {
    match name {
        "auto" => Ok(DeviceChoice::Auto),
        "cpu" => Ok(DeviceChoice::Cpu),
        "cuda" => Ok(DeviceChoice::Cuda(0)),
        other => other
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<usize>().ok())
            .map(DeviceChoice::Cuda)
            .ok_or_else(|| {
                format!("device must be \"auto\", \"cpu\", \"cuda\" or \"cuda:N\", got {other:?}")
            }),
    }
}

/// The device to train on: the first CUDA device when there is one, else the CPU.
pub fn default_device() -> Device {
    if tch::Cuda::is_available() {
        Device::Cuda(0)
    } else {
        Device::Cpu
    }
}

/// The device a config's `device` names (`None` or `"auto"`: [`default_device`]); asking for
/// a CUDA device libtorch does not see is an error.
pub fn config_device(name: Option<&str>) -> Result<Device> {
    let choice = parse_device_name(name.unwrap_or("auto")).map_err(Error::Config)?;
    match choice {
        DeviceChoice::Auto => Ok(default_device()),
        DeviceChoice::Cpu => Ok(Device::Cpu),
        DeviceChoice::Cuda(n) => {
            let have = tch::Cuda::device_count().max(0) as usize;
            if n < have {
                Ok(Device::Cuda(n))
            } else {
                Err(Error::Config(format!(
                    "device = \"cuda:{n}\", but libtorch sees {have} CUDA device(s) (is the CUDA \
                     build of libtorch installed?)"
                )))
            }
        }
    }
}

/// Whether `device` has bf16 arithmetic of its own, so that a bf16 model computes faster than
/// an f32 one there: a CPU with AVX512-BF16 (x86-64; every CPU with AMX has it too) or the BF16
/// extension (aarch64), or a CUDA device (taken as yes: bf16 training wants an Ampere or later
/// GPU). On any other CPU libtorch converts bf16 operands to f32 and back around every
/// operation, and bf16 runs several times slower than f32.
pub fn native_bf16(device: Device) -> bool {
    match device {
        Device::Cpu => cpu_has_bf16(),
        _ => true,
    }
}

#[cfg(target_arch = "x86_64")]
fn cpu_has_bf16() -> bool {
    std::arch::is_x86_feature_detected!("avx512bf16")
}

#[cfg(target_arch = "aarch64")]
fn cpu_has_bf16() -> bool {
    std::arch::is_aarch64_feature_detected!("bf16")
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn cpu_has_bf16() -> bool {
    false
}
