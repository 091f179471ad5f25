"""Upstream baselines, byte for byte: fetched from the pinned release, verified, loaded under a guarded import root."""
from kda.vendor.fetch import VendorInfo, vendor_task
from kda.vendor.importer import load_entry_points

__all__ = ["VendorInfo", "vendor_task", "load_entry_points"]
