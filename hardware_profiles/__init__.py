"""Accelerator profiles (one YAML per GPU: datasheet figures with their sources) and calibrated
profiles (calibrated/), and local devices (local/: workstation and edge GPUs, Apple Silicon, server
CPUs), shipped as package data so an installed sizer finds them anywhere."""

from pathlib import Path

PROFILES_DIR = Path(__file__).resolve().parent
CALIBRATED_DIR = PROFILES_DIR / "calibrated"
LOCAL_DIR = PROFILES_DIR / "local"          # workstation and edge GPUs, Apple Silicon, server CPUs
