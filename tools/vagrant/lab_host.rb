# What the Vagrantfile does on the learner's own machine, in plain Ruby that runs wherever Vagrant runs (Linux,
# macOS, Windows): no shell, no ssh-keygen, no path written with "/" by hand. tests/ruby/test_lab_host.rb runs it
# with a Windows-like and a macOS-like host (tests/unit/test_vagrant_host_code.py runs that from pytest).
require "base64"
require "fileutils"
require "openssl"
require "rbconfig"

module LabHost
  module_function

  # :windows, :macos or :linux (any other Unix-like host counts as linux here).
  def host_os(name = RbConfig::CONFIG["host_os"])
    case name
    when /mswin|mingw|cygwin|windows/i then :windows
    when /darwin|mac os/i then :macos
    else :linux
    end
  end

  # The lab's virtualenv Python where `make deps` made one (bin/python on Unix, Scripts\python.exe on Windows),
  # else the host's own interpreter by name (python on Windows, python3 elsewhere).
  def python(root, os = host_os)
    venv = os == :windows ? File.join(root, ".venv", "Scripts", "python.exe") : File.join(root, ".venv", "bin", "python")
    return venv if File.file?(venv)

    os == :windows ? "python" : "python3"
  end

  # An SSH string (RFC 4251): its length, then its bytes.
  def ssh_string(bytes)
    [bytes.bytesize].pack("N") + bytes.b
  end

  # A new ed25519 key pair as ssh-keygen writes it: the private key in OpenSSH's own format (unencrypted, the only
  # format OpenSSH reads for ed25519) and the public key's authorized_keys line. OpenSSL gives the key; its raw
  # 32-byte seed and public key are the last bytes of their DER encodings (PKCS#8, SubjectPublicKeyInfo).
  def ssh_keypair(comment)
    key = OpenSSL::PKey.generate_key("ED25519")
    seed = key.private_to_der[-32..]
    pub = key.public_to_der[-32..]
    blob = ssh_string("ssh-ed25519") + ssh_string(pub)
    check = OpenSSL::Random.random_bytes(4)
    secret = check + check + blob + ssh_string(seed + pub) + ssh_string(comment)
    secret += (1..((8 - (secret.bytesize % 8)) % 8)).map(&:chr).join.b # padding 1, 2, 3 … to the cipher block (8)
    body = "openssh-key-v1\0".b + ssh_string("none") + ssh_string("none") + ssh_string("") + [1].pack("N") +
           ssh_string(blob) + ssh_string(secret)
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\n#{Base64.strict_encode64(body).scan(/.{1,70}/).join("\n")}\n" \
          "-----END OPENSSH PRIVATE KEY-----\n"
    [pem, "ssh-ed25519 #{Base64.strict_encode64(blob)} #{comment}"]
  end

  # The key pair at `path` (and `path`.pub), made once: its folders only for their owner, the private key 0600.
  # (Windows has no such modes: there the folder's own permissions, the user's profile, keep it.) Returns the
  # public key's line.
  def ensure_ssh_key(path, comment = "k8s-arch-lab")
    unless File.exist?(path)
      [File.dirname(File.dirname(path)), File.dirname(path)].each do |dir|
        next if File.directory?(dir)

        FileUtils.mkdir_p(dir)
        File.chmod(0o700, dir) # only the folders made here: an existing state folder keeps its mode
      end
      pem, public_line = ssh_keypair(comment)
      File.open(path, File::WRONLY | File::CREAT | File::EXCL, 0o600) { |f| f.write(pem) }
      File.chmod(0o600, path)
      File.write("#{path}.pub", "#{public_line}\n")
    end
    File.read("#{path}.pub").strip
  end
end

require "ipaddr"
require "yaml"

# The machines of a profile, read from the settings file in Ruby alone (for a host without the lab's Python:
# `controller: lab`). The same names and addresses tools/settings.py gives (tests/unit/test_vagrant_host_code.py
# compares them for every profile); the full validation runs inside the controller before it provisions anything.
module LabHost
  CP_FIRST = 11
  WORKER_FIRST = 21
  ETCD_FIRST = 91

  class SettingsError < StandardError; end

  module_function

  def machines(root, env = ENV)
    path = env["K8S_LAB_SETTINGS"] || File.join(root, "settings.yml")
    doc = YAML.safe_load(File.read(path))
    profile = env["K8S_LAB_PROFILE"] || doc["profile"]
    counts = (doc["profiles"] || {})[profile]
    unless counts
      raise SettingsError, "#{path}: profile #{profile.inspect} is not one of profiles " \
                           "(#{(doc['profiles'] || {}).keys.join(', ')})"
    end
    %w[control_plane workers].each do |field|
      next if counts[field].is_a?(Integer) && counts[field] >= 0

      raise SettingsError, "#{path}: profiles.#{profile}.#{field}: #{counts[field].inspect} is not a count"
    end
    base = IPAddr.new(doc.dig("network", "node_cidr")).to_range.first.to_i
    roles = [["control_plane", "cp", CP_FIRST, counts["control_plane"]], ["worker", "w", WORKER_FIRST, counts["workers"]],
             ["etcd", "e", ETCD_FIRST, counts["etcd"] || 0]]
    nodes = roles.flat_map do |role, short, first, count|
      (0...count).map { |i| { "name" => "#{short}#{i + 1}", "role" => role, "ip" => IPAddr.new(base + first + i, Socket::AF_INET).to_s } }
    end
    { "cluster_name" => doc["cluster_name"], "profile" => profile, "nodes" => nodes, "node" => doc["node"],
      "box" => doc["box"], "node_cidr" => doc.dig("network", "node_cidr"), "doc" => doc }
  end

  CONTROLLER_HOST = 5
  CONTROLLER_CPUS = 2
  CONTROLLER_MEMORY_MB = 1536
  # What the controller leaves out of this host's artifact cache: what only this host's builds and tests use.
  CACHE_EXCLUDES = [".build/", ".extracted/", ".fill.lock", "box/", "fresh-host/", "go/", "kvm-probe.json",
                    "node-image/", "reports/", "conformance/"].freeze

  # Did `make deps` make the lab's virtualenv in this checkout?
  def virtualenv?(root, os = host_os)
    python(root, os) != (os == :windows ? "python" : "python3") # python gives the virtualenv's only where it exists
  end

  EMULATION_TIMEOUT_SCALE = 8

  # The provider of a host without the lab's Python: `vagrant up --provider=X`, then K8S_LAB_PROVIDER, then
  # settings.yml; its auto is Vagrant's default provider (VAGRANT_DEFAULT_PROVIDER), else libvirt on a Linux host
  # with Vagrant's libvirt plugin, else VirtualBox (macOS and Windows laptops).
  def provider(doc, env, argv, libvirt_plugin, os = host_os)
    given = argv.each_with_index.map do |arg, i|
      arg.start_with?("--provider=") ? arg.split("=", 2).last : (argv[i + 1] if arg == "--provider")
    end.compact.last
    chosen = given || env["K8S_LAB_PROVIDER"].to_s.then { |v| v.empty? ? nil : v } || doc["provider"] || "auto"
    return chosen unless chosen == "auto"
    return env["VAGRANT_DEFAULT_PROVIDER"] unless env["VAGRANT_DEFAULT_PROVIDER"].to_s.empty?

    os == :linux && libvirt_plugin ? "libvirt" : "virtualbox"
  end

  # What the Vagrantfile needs, on a host that has only Vagrant and a hypervisor (no virtualenv: `controller:
  # lab`), in the shape `python3 -m tools.settings resolve` gives it. The controller machine validates the
  # settings in full before it provisions anything.
  def settings(root, env = ENV, argv: [], libvirt_plugin: false, os: host_os)
    lab = machines(root, env)
    doc = lab.delete("doc")
    controller = env["K8S_LAB_CONTROLLER"].to_s.empty? ? (doc["controller"] || "auto") : env["K8S_LAB_CONTROLLER"]
    unless %w[auto lab].include?(controller)
      raise SettingsError, "controller: #{controller.inspect}: a host-side controller needs the lab's Python here " \
                           "(make deps, on Linux); without it only controller: lab (or auto) works"
    end
    chosen = provider(doc, env, argv, libvirt_plugin, os)
    unless %w[libvirt virtualbox docker].include?(chosen)
      raise SettingsError, "provider: unknown provider #{chosen.inspect}; allowed: auto, virtualbox, libvirt, docker"
    end
    accel = case chosen
            when "libvirt"
              given = env["K8S_LAB_ACCEL"].to_s
              %w[kvm emulation].include?(given) ? given : (File.exist?("/dev/kvm") ? "kvm" : "emulation")
            when "virtualbox" then "hardware"
            else "container"
            end
    scale = doc["timeout_scale"].is_a?(Integer) ? doc["timeout_scale"] : (accel == "emulation" ? EMULATION_TIMEOUT_SCALE : 1)
    base = IPAddr.new(lab["node_cidr"]).to_range.first.to_i
    lab.merge("provider" => chosen, "accel" => accel, "timeout_scale" => scale, "box" => (doc["box"] || {})[chosen],
              "network" => { "node_cidr" => lab["node_cidr"] }, "controller" => "lab",
              "controller_ip" => IPAddr.new(base + CONTROLLER_HOST, Socket::AF_INET).to_s,
              "state_dir" => state_dir(root, env),
              "provider_warning" => "")
  end

  # The state folder of this checkout's cluster (tools/locations.py): K8S_LAB_STATE_DIR, else .lab in the checkout.
  def state_dir(root, env = ENV)
    env["K8S_LAB_STATE_DIR"].to_s.empty? ? File.join(root, ".lab") : File.expand_path(env["K8S_LAB_STATE_DIR"])
  end

  # The artifact cache of this host (the rules of tools/locations.py): K8S_LAB_CACHE, else
  # $XDG_CACHE_HOME/k8s-arch-lab, else ~/.cache/k8s-arch-lab.
  def cache_dir(env = ENV)
    return File.expand_path(env["K8S_LAB_CACHE"]) unless env["K8S_LAB_CACHE"].to_s.empty?

    base = env["XDG_CACHE_HOME"].to_s.empty? ? File.join(Dir.home, ".cache") : env["XDG_CACHE_HOME"]
    File.join(base, "k8s-arch-lab")
  end
end
