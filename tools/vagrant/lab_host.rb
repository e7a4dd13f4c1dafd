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
      "box" => doc["box"], "node_cidr" => doc.dig("network", "node_cidr") }
  end
end
