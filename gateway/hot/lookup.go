package hot

// Lookup returns one tracked device's rate as of the last Evaluate and
// whether it is isolated; false when the device is not tracked (idle for
// two windows, or beyond MaxDevices).
func (d *Detector) Lookup(device string) (DeviceRate, bool) {
	dv, ok := d.devices[device]
	if !ok {
		return DeviceRate{}, false
	}
	return DeviceRate{Device: device, Rate: dv.rate, Hot: dv.hot}, true
}
