-- phpMyAdmin SQL Dump
-- version 5.2.1
-- https://www.phpmyadmin.net/
--
-- Host: db
-- Generation Time: Jan 20, 2026 at 10:00 AM
-- Server version: 10.11.6-MariaDB-1:10.11.6+maria~ubu2204
-- PHP Version: 8.2.14

SET SQL_MODE = "NO_AUTO_VALUE_ON_ZERO";
START TRANSACTION;
SET time_zone = "+00:00";


/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;
/*!40101 SET @OLD_CHARACTER_SET_RESULTS=@@CHARACTER_SET_RESULTS */;
/*!40101 SET @OLD_COLLATION_CONNECTION=@@COLLATION_CONNECTION */;
/*!40101 SET NAMES utf8mb4 */;

--
-- Database: `yourls`
--

-- --------------------------------------------------------

--
-- Table structure for table `yourls_log`
--

CREATE TABLE `yourls_log` (
  `click_id` int(11) NOT NULL,
  `click_time` datetime NOT NULL,
  `shorturl` varchar(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `referrer` varchar(200) NOT NULL,
  `user_agent` varchar(255) NOT NULL,
  `ip_address` varchar(41) NOT NULL,
  `country_code` char(2) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

--
-- Dumping data for table `yourls_log`
--

INSERT INTO `yourls_log` (`click_id`, `click_time`, `shorturl`, `referrer`, `user_agent`, `ip_address`, `country_code`) VALUES
(1, '2026-01-15 10:05:00', 'ozh', 'direct', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)', '203.0.113.7', 'FR'),
(2, '2026-01-15 10:06:00', 'ozh', 'https://example.com/?a=1;b=2', 'curl/8.5.0', '203.0.113.8', '');

-- --------------------------------------------------------

--
-- Table structure for table `yourls_options`
--

CREATE TABLE `yourls_options` (
  `option_id` bigint(20) UNSIGNED NOT NULL,
  `option_name` varchar(64) NOT NULL DEFAULT '',
  `option_value` longtext NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

--
-- Dumping data for table `yourls_options`
--

INSERT INTO `yourls_options` (`option_id`, `option_name`, `option_value`) VALUES
(1, 'version', '1.9.2'),
(2, 'db_version', '506'),
(3, 'next_id', '7'),
(4, 'active_plugins', 'a:1:{i:0;s:25:\"yourls-import-export/plugin.php\";}');

-- --------------------------------------------------------

--
-- Table structure for table `yourls_url`
--

CREATE TABLE `yourls_url` (
  `keyword` varchar(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT '',
  `url` text CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `title` text DEFAULT NULL,
  `timestamp` timestamp NOT NULL DEFAULT current_timestamp(),
  `ip` varchar(41) NOT NULL,
  `clicks` int(10) UNSIGNED NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

--
-- Dumping data for table `yourls_url`
--

INSERT INTO `yourls_url` (`keyword`, `url`, `title`, `timestamp`, `ip`, `clicks`) VALUES
('ozh', 'https://ozh.org/', 'ozh.org', '2026-01-15 10:00:00', '127.0.0.1', 42),
('yourls', 'https://yourls.org/', 'YOURLS: Your Own URL Shortener', '2026-01-15 10:00:00', '127.0.0.1', 0),
('yourlsblog', 'https://blog.yourls.org/', 'YOURLS\' Blog', '2026-01-15 10:00:00', '127.0.0.1', 3),
('q', 'https://example.com/search?q=a,b&c=\'d\'', 'Search \"a,b\"; then (c)', '2026-01-16 09:00:00', '::1', 1),
('hex', 0x68747470733a2f2f6578616d706c652e636f6d2f686578, NULL, '2026-01-16 09:05:00', '::1', 0),
('a/b', 'https://example.com/slash', NULL, '2026-01-17 08:00:00', '::1', 0),
('js', 'javascript:alert(1)', NULL, '2026-01-17 08:01:00', '::1', 0);

--
-- Indexes for dumped tables
--

--
-- Indexes for table `yourls_log`
--
ALTER TABLE `yourls_log`
  ADD PRIMARY KEY (`click_id`),
  ADD KEY `shorturl` (`shorturl`);

--
-- Indexes for table `yourls_options`
--
ALTER TABLE `yourls_options`
  ADD PRIMARY KEY (`option_id`,`option_name`),
  ADD KEY `option_name` (`option_name`);

--
-- Indexes for table `yourls_url`
--
ALTER TABLE `yourls_url`
  ADD PRIMARY KEY (`keyword`),
  ADD KEY `ip` (`ip`),
  ADD KEY `timestamp` (`timestamp`),
  ADD KEY `url_idx` (`url`(30));

--
-- AUTO_INCREMENT for dumped tables
--

--
-- AUTO_INCREMENT for table `yourls_log`
--
ALTER TABLE `yourls_log`
  MODIFY `click_id` int(11) NOT NULL AUTO_INCREMENT, AUTO_INCREMENT=3;

--
-- AUTO_INCREMENT for table `yourls_options`
--
ALTER TABLE `yourls_options`
  MODIFY `option_id` bigint(20) UNSIGNED NOT NULL AUTO_INCREMENT, AUTO_INCREMENT=5;
COMMIT;

/*!40101 SET CHARACTER_SET_CLIENT=@OLD_CHARACTER_SET_CLIENT */;
/*!40101 SET CHARACTER_SET_RESULTS=@OLD_CHARACTER_SET_RESULTS */;
/*!40101 SET COLLATION_CONNECTION=@OLD_COLLATION_CONNECTION */;
