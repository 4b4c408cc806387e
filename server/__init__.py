"""The driver host: everything a driver process needs that does not depend on the device."""
