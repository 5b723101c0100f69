#!/bin/sh
# Regenerates the sysfs/dev fixture of list_test.go (run from this directory).
# Layout as on a Raspberry Pi with an FTDI adapter, an Arduino (CDC ACM), a
# CH340 with a hostile manufacturer string, the PL011 UART, an 8250
# placeholder without hardware and a virtual console.
set -eu
rm -rf sys dev
# (empty directories get a .keep file at the end: git does not keep empty ones)
usb=sys/devices/platform/scb/fd500000.pcie/pci0000:00/0000:00:00.0/0000:01:00.0/usb1
mkdir -p sys/class/tty sys/bus/usb-serial/drivers/ftdi_sio sys/bus/usb-serial/drivers/ch341-uart \
  sys/bus/usb/drivers/cdc_acm sys/bus/amba/drivers/uart-pl011 sys/bus/platform/drivers/serial8250

attrs() { # dir vid pid serial manufacturer product
  mkdir -p "$1"
  printf '%s\n' "$2" >"$1/idVendor"; printf '%s\n' "$3" >"$1/idProduct"
  [ -n "$4" ] && printf '%s\n' "$4" >"$1/serial"
  printf '%b\n' "$5" >"$1/manufacturer"; printf '%s\n' "$6" >"$1/product"
}
tty() { # class-name device-dir-relative-to-sys/devices tty-dir-under-it driver-path
  name=$1 devdir=sys/devices/$2
  mkdir -p "$devdir/tty/$name"
  ln -s ../../../$(basename "$devdir") "$devdir/tty/$name/device"
  ln -s "$(echo "$devdir" | sed 's|[^/]*|..|g')/$3" "$devdir/driver"
  ln -s "../../devices/$2/tty/$name" "sys/class/tty/$name"
  printf '%s\n' "$4" >"$devdir/tty/$name/dev"
}
rel=${usb#sys/devices/}

# FTDI FT232R: tty under the usb-serial port device, under the interface.
attrs "$usb/1-1.2" 0403 6001 A10K4ZQX FTDI "FT232R USB UART"
mkdir -p "$usb/1-1.2/1-1.2:1.0"; echo 00 >"$usb/1-1.2/1-1.2:1.0/bInterfaceNumber"
tty ttyUSB0 "$rel/1-1.2/1-1.2:1.0/ttyUSB0" sys/bus/usb-serial/drivers/ftdi_sio 188:0

# Arduino Uno (CDC ACM): tty directly under the interface.
attrs "$usb/1-1.3" 2341 0043 7593231373535121E0A1 "Arduino (www.arduino.cc)" "Arduino Uno"
mkdir -p "$usb/1-1.3/1-1.3:1.0"; echo 00 >"$usb/1-1.3/1-1.3:1.0/bInterfaceNumber"
tty ttyACM0 "$rel/1-1.3/1-1.3:1.0" sys/bus/usb/drivers/cdc_acm 166:0

# CH340 without a serial number, with an escape sequence in its manufacturer.
attrs "$usb/1-1.4" 1a86 7523 "" '\033[31mQinHeng\tElectronics' "USB Serial"
mkdir -p "$usb/1-1.4/1-1.4:1.0"; echo 00 >"$usb/1-1.4/1-1.4:1.0/bInterfaceNumber"
tty ttyUSB10 "$rel/1-1.4/1-1.4:1.0/ttyUSB10" sys/bus/usb-serial/drivers/ch341-uart 188:10

# The Pi's PL011 UART and an 8250 placeholder (type 0: no hardware).
tty ttyAMA0 platform/soc/fe201000.serial sys/bus/amba/drivers/uart-pl011 204:64
echo 91 >sys/devices/platform/soc/fe201000.serial/tty/ttyAMA0/type
mkdir -p sys/devices/platform/serial8250/tty/ttyS1
ln -s ../../../serial8250 sys/devices/platform/serial8250/tty/ttyS1/device
echo 0 >sys/devices/platform/serial8250/tty/ttyS1/type
ln -s ../../devices/platform/serial8250/tty/ttyS1 sys/class/tty/ttyS1

# A virtual console: no device link.
mkdir -p sys/devices/virtual/tty/tty1
ln -s ../../devices/virtual/tty/tty1 sys/class/tty/tty1

mkdir -p dev/serial/by-id
for n in ttyUSB0 ttyACM0 ttyUSB10 ttyAMA0 ttyS1 tty1; do : >"dev/$n"; done
ln -s ../../ttyUSB0 dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A10K4ZQX-if00-port0
ln -s ../../ttyACM0 "dev/serial/by-id/usb-Arduino__www.arduino.cc__Arduino_Uno_7593231373535121E0A1-if00"
ln -s ../../ttyUSB10 dev/serial/by-id/usb-1a86_USB_Serial-if00-port0
find sys dev -type d -empty -exec touch {}/.keep \;
