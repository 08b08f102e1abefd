package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// Neither DynamoDB Local nor the two Node.js emulators can be told which
// address to listen on: DynamoDB Local builds a Jetty Server(port), kinesalite
// calls listen(port) and kinesis-local hard-codes 0.0.0.0. The bench therefore
// starts each of them through a tiny launcher that binds 127.0.0.1 and that
// exits when its stdin (a pipe held by the test binary) is closed, a second
// guard against orphans next to Pdeathsig.

// loopbackJSSource is preloaded (node -r) into kinesalite and kinesis-local.
const loopbackJSSource = `'use strict';
// Written by kinesislease/internal/testkit/testutil: listen on 127.0.0.1 only, and
// exit when the test binary that started this process goes away.
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const a = args[0];
  if (a !== null && typeof a === 'object' && !Array.isArray(a)) {
    if (a.path === undefined && a.fd === undefined && a._handle === undefined && a.handle === undefined) {
      args[0] = Object.assign({}, a, { host: '127.0.0.1' });
    }
  } else if (typeof a === 'number' || (typeof a === 'string' && /^[0-9]+$/.test(a))) {
    if (typeof args[1] === 'string') args[1] = '127.0.0.1';
    else args.splice(1, 0, '127.0.0.1');
  }
  return listen.apply(this, args);
};
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
// kinesalite rethrows a request's 'error' event, so a client that cancels a
// request mid-flight (as a consumer does when it stops reading a shard)
// crashes it with "Error: aborted" (ECONNRESET). Real Kinesis shrugs that
// off; so does the emulator here. Any other uncaught error still ends it.
process.on('uncaughtException', (err) => {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) {
    return;
  }
  console.error(err);
  process.exit(1);
});
`

// javaLauncherClass is the class name in javaLauncherSource.
const javaLauncherClass = "LoopbackDynamoDBLocal"

// javaLauncherSource starts DynamoDB Local like its own main class does
// (telemetry aside, which -disableTelemetry turns off anyway), but sets the
// Jetty connectors' host to 127.0.0.1 before starting the server. It only
// uses reflection, so it compiles without DynamoDB Local on the classpath.
const javaLauncherSource = `// Written by kinesislease/internal/testkit/testutil.
public final class LoopbackDynamoDBLocal {
  public static void main(String[] args) throws Exception {
    Thread watchdog = new Thread(() -> {
      try {
        while (System.in.read() != -1) {
        }
      } catch (java.io.IOException e) {
        // fall through: the test binary is gone
      }
      Runtime.getRuntime().halt(0);
    }, "testutil-stdin-watchdog");
    watchdog.setDaemon(true);
    watchdog.start();

    Class<?> runner = Class.forName("software.amazon.dynamodb.services.local.main.ServerRunner");
    Object proxy = runner.getMethod("createServerFromCommandLineArgs", String[].class).invoke(null, (Object) args);
    java.lang.reflect.Field field = proxy.getClass().getDeclaredField("server");
    field.setAccessible(true);
    Object server = field.get(proxy);
    Object[] connectors = (Object[]) server.getClass().getMethod("getConnectors").invoke(server);
    if (connectors.length == 0) {
      throw new IllegalStateException("DynamoDB Local has no connector to bind to 127.0.0.1");
    }
    for (Object c : connectors) {
      c.getClass().getMethod("setHost", String.class).invoke(c, "127.0.0.1");
    }
    proxy.getClass().getMethod("start").invoke(proxy);
  }
}
`

// writeLoopbackJS writes the Node.js preload script into dir.
func writeLoopbackJS(dir string) (string, error) {
	path := filepath.Join(dir, "loopback.js")
	return path, os.WriteFile(path, []byte(loopbackJSSource), 0o644)
}

// javaLauncherDir returns a directory holding the compiled Java launcher,
// compiling it once per machine into the user cache directory (javac takes
// about half a second; java's source-file mode would pay more on every run).
func javaLauncherDir(javac string) (string, error) {
	sum := sha256.Sum256([]byte(javaLauncherSource))
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	base = filepath.Join(base, "kinesislease-testutil")
	dir := filepath.Join(base, "dynamodb-launcher-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, javaLauncherClass+".class")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	build, err := os.MkdirTemp(base, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(build)
	src := filepath.Join(build, "src")
	out := filepath.Join(build, "out")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	srcFile := filepath.Join(src, javaLauncherClass+".java")
	if err := os.WriteFile(srcFile, []byte(javaLauncherSource), 0o644); err != nil {
		return "", err
	}
	cmd := exec.Command(javac, "--release", "17", "-d", out, srcFile)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("compiling the DynamoDB Local launcher with %s: %v\n%s", javac, err, msg)
	}
	// Another test binary may have won the race; either copy is good.
	if err := os.Rename(out, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		if _, statErr := os.Stat(filepath.Join(dir, javaLauncherClass+".class")); statErr != nil {
			return "", err
		}
	}
	return dir, nil
}
